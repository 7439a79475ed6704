#include "coordinator/session/stack_collector.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/stack_groups.h"

namespace ddp::session {
namespace {

// Sets `out`'s ranks (by global rank; a rank twice: the first kept) and their
// groups by identical stack, the smallest group first.
void AddRanksAndGroups(std::vector<v1::RankStack> ranks, v1::JobStacks& out) {
  std::stable_sort(ranks.begin(), ranks.end(), [](const v1::RankStack& a, const v1::RankStack& b) {
    return a.global_rank() < b.global_rank();
  });
  std::vector<RankStack> to_group;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0 && ranks[i].global_rank() == ranks[i - 1].global_rank()) continue;
    to_group.push_back(
        RankStack{ranks[i].global_rank(), ranks[i].node_id(), ranks[i].stack(), ranks[i].error()});
    *out.add_ranks() = ranks[i];
  }
  for (const StackGroup& group : GroupStacks(to_group)) {
    v1::StackGroup* g = out.add_groups();
    for (int64_t rank : group.ranks) g->add_ranks(rank);
    g->set_stack(group.stack);
  }
}

std::string CutStack(const std::string& stack, size_t max_bytes) {
  if (stack.size() <= max_bytes) return stack;
  size_t cut = stack.rfind('\n', max_bytes);
  cut = cut == std::string::npos ? max_bytes : cut + 1;
  return absl::StrCat(stack.substr(0, cut), "... (cut at ", max_bytes, " bytes)\n");
}

}  // namespace

StackCollector::StackCollector(Options options, const Clock& clock, SendRequest send)
    : options_(options), clock_(clock), send_(std::move(send)) {
  deadline_thread_ = std::thread([this] { DeadlineLoop(); });
}

StackCollector::~StackCollector() { Shutdown(); }

void StackCollector::Shutdown() {
  std::vector<Pending> left;
  {
    absl::MutexLock lock(&mu_);
    if (quit_) return;
    quit_ = true;
    for (auto& [id, pending] : pending_) left.push_back(std::move(pending));
    pending_.clear();
  }
  deadline_thread_.join();
  for (Pending& pending : left) pending.done(Assemble(pending));
}

absl::Status StackCollector::Collect(const std::string& job_id, int64_t generation,
                                     std::vector<Node> nodes, absl::Duration timeout, Done done) {
  if (timeout < absl::ZeroDuration() || timeout > options_.max_timeout) {
    return absl::InvalidArgumentError(
        absl::StrCat("stack collection timeout ", absl::FormatDuration(timeout),
                     " is out of range [0, ", absl::FormatDuration(options_.max_timeout), "]"));
  }
  if (timeout == absl::ZeroDuration()) timeout = options_.default_timeout;
  const std::vector<Node> targets = nodes;
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    if (quit_) {
      return absl::UnavailableError("the coordinator is shutting down; ask again later");
    }
    if (static_cast<int>(pending_.size()) >= options_.max_pending) {
      return absl::ResourceExhaustedError(
          absl::StrCat(pending_.size(),
                       " stack collections are under way, the limit; try again "
                       "in a few seconds"));
    }
    id = next_id_++;
    Pending& pending = pending_[id];
    pending.job_id = job_id;
    pending.generation = generation;
    pending.timeout = timeout;
    pending.deadline = clock_.Now() + timeout;
    pending.done = std::move(done);
    for (Node& node : nodes) pending.nodes.push_back(NodeAnswer{std::move(node)});
  }
  // Outside the lock: a fast answer may arrive before the loop ends.
  std::vector<std::string> unreachable;
  for (const Node& node : targets) {
    if (!send_(job_id, node, id)) unreachable.push_back(node.node_id);
  }
  std::optional<Pending> finished;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return absl::OkStatus();  // already completed
    for (NodeAnswer& n : it->second.nodes) {
      if (std::find(unreachable.begin(), unreachable.end(), n.node.node_id) != unreachable.end()) {
        n.reachable = false;
      }
    }
    if (CompleteLocked(it->second)) {
      finished = std::move(it->second);
      pending_.erase(it);
    }
  }
  if (finished) finished->done(Assemble(*finished));
  return absl::OkStatus();
}

void StackCollector::OnStacks(const std::string& job_id, const std::string& node_id,
                              uint64_t incarnation, const v1::Stacks& stacks) {
  std::optional<Pending> finished;
  {
    absl::MutexLock lock(&mu_);
    if (stacks.request_id() == 0) {
      KeepHangStacksLocked(job_id, node_id, stacks);
      return;
    }
    auto it = pending_.find(stacks.request_id());
    if (it == pending_.end() || it->second.job_id != job_id) return;  // late or foreign
    Pending& pending = it->second;
    for (NodeAnswer& n : pending.nodes) {
      if (n.node.node_id != node_id || n.node.incarnation != incarnation || n.answered) continue;
      n.answered = true;
      for (const v1::WorkerStack& w : stacks.workers()) {
        // Only ranks of this node, each once.
        if (w.global_rank() < n.node.global_rank_offset ||
            w.global_rank() >= n.node.global_rank_offset + n.node.nproc) {
          continue;
        }
        const bool seen = std::any_of(n.workers.begin(), n.workers.end(), [&](const auto& k) {
          return k.global_rank() == w.global_rank();
        });
        if (seen) continue;
        n.workers.push_back(Kept(w));
      }
    }
    if (CompleteLocked(pending)) {
      finished = std::move(pending);
      pending_.erase(it);
    }
  }
  if (finished) finished->done(Assemble(*finished));
}

v1::WorkerStack StackCollector::Kept(const v1::WorkerStack& w) const {
  v1::WorkerStack kept = w;
  kept.set_stack(CutStack(w.stack(), options_.max_stack_bytes));
  kept.set_error(CutStack(w.error(), 1024));
  return kept;
}

void StackCollector::KeepHangStacksLocked(const std::string& job_id, const std::string& node_id,
                                          const v1::Stacks& stacks) {
  const int64_t generation = stacks.header().generation();
  auto it = hang_stacks_.find(job_id);
  if (it != hang_stacks_.end() && generation < it->second.generation) return;  // a stale one
  if (it == hang_stacks_.end() || generation > it->second.generation) {
    if (it == hang_stacks_.end() &&
        hang_stacks_.size() >= static_cast<size_t>(options_.max_jobs_with_hang_stacks)) {
      auto oldest = hang_stacks_.begin();
      for (auto j = hang_stacks_.begin(); j != hang_stacks_.end(); ++j) {
        if (j->second.taken < oldest->second.taken) oldest = j;
      }
      hang_stacks_.erase(oldest);
    }
    HangStacks fresh;
    fresh.generation = generation;
    fresh.taken = clock_.Now();
    it = hang_stacks_.insert_or_assign(job_id, std::move(fresh)).first;
  }
  std::vector<v1::WorkerStack>& kept = it->second.by_node[node_id];
  kept.clear();
  for (const v1::WorkerStack& w : stacks.workers()) {
    if (kept.size() >= static_cast<size_t>(options_.max_workers_per_node)) break;
    kept.push_back(Kept(w));
  }
}

absl::StatusOr<v1::JobStacks> StackCollector::LastHangStacks(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = hang_stacks_.find(job_id);
  if (it == hang_stacks_.end()) {
    return absl::NotFoundError(absl::StrCat("no stacks of a hang of job '", job_id,
                                            "' since this coordinator started (a hang's stacks "
                                            "are kept in memory only)"));
  }
  v1::JobStacks out;
  out.set_job_id(job_id);
  out.set_generation(it->second.generation);
  out.set_collected_unix_ms(absl::ToUnixMillis(it->second.taken));
  std::vector<v1::RankStack> ranks;
  for (const auto& [node_id, workers] : it->second.by_node) {
    for (const v1::WorkerStack& w : workers) {
      v1::RankStack r;
      r.set_global_rank(w.global_rank());
      r.set_node_id(node_id);
      r.set_local_rank(w.local_rank());
      r.set_pid(w.pid());
      r.set_stack(w.stack());
      if (w.stack().empty()) r.set_error(w.error().empty() ? "an empty stack" : w.error());
      ranks.push_back(std::move(r));
    }
  }
  AddRanksAndGroups(std::move(ranks), out);
  return out;
}

void StackCollector::ExpireDue() {
  std::vector<Pending> finished;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_.Now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.deadline <= now) {
        finished.push_back(std::move(it->second));
        pending_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (Pending& pending : finished) pending.done(Assemble(pending));
}

bool StackCollector::CompleteLocked(const Pending& pending) const {
  return std::all_of(pending.nodes.begin(), pending.nodes.end(),
                     [](const NodeAnswer& n) { return n.answered || !n.reachable; });
}

v1::JobStacks StackCollector::Assemble(const Pending& pending) const {
  v1::JobStacks out;
  out.set_job_id(pending.job_id);
  out.set_generation(pending.generation);
  out.set_collected_unix_ms(absl::ToUnixMillis(clock_.Now()));
  std::vector<v1::RankStack> ranks;
  for (const NodeAnswer& n : pending.nodes) {
    std::string missing;
    if (!n.reachable) {
      missing = absl::StrCat("node ", n.node.node_id, " has no session with the coordinator");
    } else if (!n.answered) {
      missing = absl::StrCat("node ", n.node.node_id, " did not answer within ",
                             absl::FormatDuration(pending.timeout));
    }
    if (!missing.empty()) out.add_missing_nodes(n.node.node_id);
    for (int local = 0; local < n.node.nproc; ++local) {
      const int64_t rank = n.node.global_rank_offset + local;
      v1::RankStack r;
      r.set_global_rank(rank);
      r.set_node_id(n.node.node_id);
      r.set_local_rank(local);
      auto w = std::find_if(n.workers.begin(), n.workers.end(),
                            [&](const v1::WorkerStack& k) { return k.global_rank() == rank; });
      if (!missing.empty()) {
        r.set_error(missing);
      } else if (w == n.workers.end()) {
        r.set_error(absl::StrCat("no running worker of rank ", rank, " on node ", n.node.node_id));
      } else {
        r.set_pid(w->pid());
        r.set_stack(w->stack());
        if (w->stack().empty()) {
          r.set_error(w->error().empty() ? "an empty stack" : w->error());
        }
      }
      ranks.push_back(std::move(r));
    }
  }
  AddRanksAndGroups(std::move(ranks), out);
  return out;
}

void StackCollector::DeadlineLoop() {
  absl::MutexLock lock(&mu_);
  while (!quit_) {
    absl::Time next = absl::InfiniteFuture();
    for (const auto& [id, pending] : pending_) next = std::min(next, pending.deadline);
    const absl::Duration wait = next == absl::InfiniteFuture()
                                    ? absl::Seconds(1)
                                    : std::max(next - clock_.Now(), absl::Milliseconds(1));
    // Woken early by quit_ only; a new, earlier deadline is seen within a
    // second at most (default timeouts are seconds).
    mu_.AwaitWithTimeout(absl::Condition(&quit_), std::min(wait, absl::Seconds(1)));
    if (quit_) break;
    mu_.Unlock();
    ExpireDue();
    mu_.Lock();
  }
}

}  // namespace ddp::session
