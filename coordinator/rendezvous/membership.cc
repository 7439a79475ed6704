#include "coordinator/rendezvous/membership.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp::rendezvous {

Membership::Options Membership::OptionsFor(const JobSettings& settings,
                                           const RendezvousLimits& limits) {
  Options options;
  options.heartbeat_interval = HeartbeatInterval(settings);
  options.heartbeat_timeout = HeartbeatTimeout(settings);
  options.lease = LeaseFor(settings).lease;
  options.max_excluded_nodes = limits.max_excluded_nodes;
  return options;
}

Membership::Membership(std::string job_id, const Options& options, const Clock& clock,
                       const std::vector<std::string>& excluded, uint64_t next_join_seq)
    : job_id_(std::move(job_id)),
      options_(options),
      clock_(&clock),
      excluded_(excluded.begin(), excluded.end()),
      next_join_seq_(next_join_seq) {}

absl::Status Membership::Restore(const std::vector<NodeRecord>& records,
                                 const RendezvousLimits& limits) {
  const absl::Time now = clock_->Now();
  const int node_count = static_cast<int>(records.size());
  for (const NodeRecord& record : records) {
    if (record.group_rank() < -1 || record.group_rank() >= node_count ||
        record.incarnation() == 0 || record.nproc() < 1 ||
        record.nproc() > limits.max_nproc_per_node ||
        !ValidateId(record.node_id(), "node id", limits).ok()) {
      return absl::DataLossError(
          absl::StrCat("stored node '", Capped(record.node_id()), "' of job '", Capped(job_id_),
                       "' is inconsistent (group rank ", record.group_rank(), ", incarnation ",
                       record.incarnation(), ", nproc ", record.nproc(), ")"));
    }
    Node node;
    node.record = record;
    node.connected = false;
    node.last_heartbeat = now;
    next_join_seq_ = std::max(next_join_seq_, record.join_seq() + 1);
    nodes_.emplace(record.node_id(), std::move(node));
  }
  return absl::OkStatus();
}

absl::Status Membership::ValidateRegistration(const RegisterRequest& request, int max_nodes,
                                              const RendezvousLimits& limits) const {
  absl::Status status = ValidateId(request.node_id, "node id", limits);
  if (!status.ok()) return status;
  if (request.incarnation == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", request.node_id,
                     "' registered with incarnation 0; use a fresh non-zero "
                     "random number per agent start"));
  }
  if (request.nproc < 0 || request.nproc > limits.max_nproc_per_node) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node '", request.node_id, "' asks for nproc=", request.nproc, "; it must be in [1, ",
        limits.max_nproc_per_node, "] (0 = the job's nproc_per_node)"));
  }
  if (request.requested_rank < -1 || request.requested_rank >= max_nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node '", request.node_id, "' requests group rank ", request.requested_rank, "; job '",
        job_id_, "' has at most ", max_nodes, " nodes (ranks 0..", max_nodes - 1, ", -1 = none)"));
  }
  if (static_cast<int>(request.address.size()) > limits.max_address_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", Capped(request.address), "' of node '", request.node_id,
                     "' is longer than ", limits.max_address_length, " bytes"));
  }
  if (request.role.size() > 64) {
    return absl::InvalidArgumentError(absl::StrCat("role '", Capped(request.role), "' of node '",
                                                   request.node_id, "' is longer than 64 bytes"));
  }
  if (IsExcluded(request.node_id)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node '", request.node_id, "' was excluded from job '", job_id_, "'; it cannot rejoin"));
  }
  return absl::OkStatus();
}

Membership::Node* Membership::Find(const std::string& node_id) {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second;
}

const Membership::Node* Membership::Find(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second;
}

absl::StatusOr<Membership::Node*> Membership::Fence(const NodeRef& ref, Generation generation,
                                                    bool exact_generation) {
  if (excluded_.contains(ref.node_id)) {
    return absl::FailedPreconditionError(absl::StrCat("node '", Capped(ref.node_id),
                                                      "' was excluded from job '", job_id_,
                                                      "'; it cannot rejoin"));
  }
  Node* node = Find(ref.node_id);
  if (node == nullptr) {
    return absl::AbortedError(
        absl::StrCat("node '", Capped(ref.node_id), "' is not registered in job '", job_id_,
                     "' (lost, left or declared dead); stop its workers and register "
                     "again"));
  }
  if (node->record.incarnation() != ref.incarnation) {
    return absl::AbortedError(absl::StrCat("incarnation ", ref.incarnation, " of node '",
                                           Capped(ref.node_id), "' was replaced by incarnation ",
                                           node->record.incarnation(),
                                           "; this agent is fenced: stop its workers and exit"));
  }
  bool stale = exact_generation ? ref.generation != generation : ref.generation > generation;
  if (ref.generation < 0 || stale) {
    return absl::AbortedError(
        absl::StrCat("generation ", ref.generation, " from node '", Capped(ref.node_id),
                     "' is stale: job '", job_id_, "' is at generation ", generation,
                     "; stop the old workers and wait for the new assignment"));
  }
  return node;
}

Membership::Node& Membership::Add(const RegisterRequest& request, int nproc) {
  const absl::Time now = clock_->Now();
  Node node;
  node.record.set_node_id(request.node_id);
  node.record.set_incarnation(request.incarnation);
  node.record.set_nproc(nproc);
  node.record.set_requested_rank(request.requested_rank);
  node.record.set_address(request.address);
  node.record.set_join_seq(next_join_seq_++);
  node.role = request.role;
  node.last_heartbeat = now;
  next_liveness_check_ = std::min(next_liveness_check_, now + options_.heartbeat_timeout);
  auto [it, inserted] = nodes_.emplace(request.node_id, std::move(node));
  MarkDirty(request.node_id);
  return it->second;
}

void Membership::Replace(Node& node, const RegisterRequest& request, int nproc) {
  node.stream_closed_at.reset();
  node.record.set_incarnation(request.incarnation);
  node.record.set_nproc(nproc);
  node.record.set_requested_rank(request.requested_rank);
  node.record.set_address(request.address);
  node.role = request.role;
  node.connected = true;
  node.last_heartbeat = clock_->Now();
  MarkDirty(node.record.node_id());
}

void Membership::Resume(Node& node, const RegisterRequest& request) {
  node.connected = true;
  node.role = request.role;
  node.stream_closed_at.reset();
  node.last_heartbeat = clock_->Now();
  if (node.record.address() != request.address) {
    node.record.set_address(request.address);
    MarkDirty(node.record.node_id());
  }
}

void Membership::Heartbeat(Node& node) {
  node.last_heartbeat = clock_->Now();
  node.connected = true;
  node.stream_closed_at.reset();
}

void Membership::StreamClosed(Node& node) {
  node.connected = false;
  if (!node.stream_closed_at.has_value()) node.stream_closed_at = clock_->Now();
}

void Membership::Remove(const std::string& node_id) {
  if (nodes_.erase(node_id) == 0) return;
  dirty_nodes_.erase(node_id);
  removed_nodes_.push_back(node_id);
}

bool Membership::Alive(const Node& node) const {
  return node.connected && clock_->Now() - node.last_heartbeat < 2 * options_.heartbeat_interval;
}

std::optional<absl::Time> Membership::LostSince(const Node& node, absl::Time now) const {
  if (node.stream_closed_at.has_value()) return node.stream_closed_at;
  if (now - node.last_heartbeat >= options_.lease / 2) return node.last_heartbeat;
  return std::nullopt;
}

std::vector<std::string> Membership::Silent(absl::Time now) {
  std::vector<std::string> silent;
  if (now < next_liveness_check_) return silent;
  absl::Time earliest = absl::InfiniteFuture();
  for (const auto& [id, node] : nodes_) {
    absl::Time deadline = node.last_heartbeat + options_.heartbeat_timeout;
    if (now >= deadline) {
      silent.push_back(id);
    } else if (deadline < earliest) {
      earliest = deadline;
    }
  }
  next_liveness_check_ = earliest;
  return silent;
}

void Membership::ServingResumed(absl::Time now) {
  for (auto& [id, node] : nodes_) node.last_heartbeat = std::max(node.last_heartbeat, now);
  next_liveness_check_ = now + options_.heartbeat_timeout;
}

void Membership::ForgetGenerationProgress() {
  for (auto& [id, node] : nodes_) {
    node.succeeded = false;
    node.exited_ok = 0;
    node.exited.clear();
    node.idleness.Reset();
  }
}

std::vector<Membership::Node*> Membership::CandidatesInOrder() {
  std::vector<Node*> candidates;
  candidates.reserve(nodes_.size());
  for (auto& [id, node] : nodes_) candidates.push_back(&node);
  std::sort(candidates.begin(), candidates.end(), [](Node* a, Node* b) {
    int ra = a->record.group_rank(), rb = b->record.group_rank();
    if ((ra >= 0) != (rb >= 0)) return ra >= 0;
    if (ra >= 0 && ra != rb) return ra < rb;
    return a->record.join_seq() < b->record.join_seq();
  });
  return candidates;
}

absl::StatusOr<bool> Membership::Exclude(const std::string& node_id) {
  if (excluded_.contains(node_id)) return false;
  if (static_cast<int>(excluded_.size()) >= options_.max_excluded_nodes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("job '", job_id_, "' already excludes ", excluded_.size(),
                     " nodes, the limit; cannot exclude '", node_id, "'"));
  }
  excluded_.insert(node_id);
  return true;
}

std::vector<std::string> Membership::ExcludedSorted() const {
  std::vector<std::string> sorted(excluded_.begin(), excluded_.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

void Membership::TakeChanges(JobChanges& changes) {
  changes.removed_nodes = std::move(removed_nodes_);
  removed_nodes_.clear();
  for (const std::string& node_id : dirty_nodes_) {
    auto it = nodes_.find(node_id);
    if (it != nodes_.end()) changes.upserted_nodes.push_back(it->second.record);
  }
  dirty_nodes_.clear();
}

void Membership::ForgetChanges() {
  dirty_nodes_.clear();
  removed_nodes_.clear();
}

}  // namespace ddp::rendezvous
