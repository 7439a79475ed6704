#include "coordinator/rendezvous/idle_hang.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace ddp::rendezvous {

void NodeIdleness::Update(std::vector<WorkerActivity> workers) {
  std::sort(workers.begin(), workers.end(), [](const WorkerActivity& a, const WorkerActivity& b) {
    return a.local_rank < b.local_rank;
  });
  for (WorkerActivity& w : workers) {
    if (!w.idle_since.has_value()) continue;
    auto before = std::find_if(workers_.begin(), workers_.end(), [&](const WorkerActivity& old) {
      return old.local_rank == w.local_rank;
    });
    if (before != workers_.end() && before->idle_since.has_value()) {
      w.idle_since = std::min(*w.idle_since, *before->idle_since);
    }
  }
  workers_ = std::move(workers);
}

std::optional<absl::Time> NodeIdleness::AllIdleSince() const {
  std::optional<absl::Time> latest;
  for (const WorkerActivity& w : workers_) {
    if (!w.running) continue;
    if (!w.idle_since.has_value()) return std::nullopt;
    latest = latest.has_value() ? std::max(*latest, *w.idle_since) : *w.idle_since;
  }
  return latest;
}

std::optional<IdleHang> FindIdleHang(const std::vector<MemberIdleness>& members,
                                     absl::Duration hang_timeout, absl::Time now) {
  if (hang_timeout <= absl::ZeroDuration() || members.empty()) return std::nullopt;
  absl::Time all_idle_since = absl::InfinitePast();
  for (const MemberIdleness& m : members) {
    std::optional<absl::Time> since =
        m.idleness == nullptr ? std::nullopt : m.idleness->AllIdleSince();
    if (!since.has_value() || now - *since <= hang_timeout) return std::nullopt;
    all_idle_since = std::max(all_idle_since, *since);
  }
  std::optional<IdleHang> hang;
  for (const MemberIdleness& m : members) {
    for (const WorkerActivity& w : m.idleness->workers()) {
      if (!w.running || *w.idle_since < all_idle_since - kSameStallWindow) continue;
      const int64_t global_rank = m.global_rank_offset + w.local_rank;
      if (!hang.has_value() || *w.idle_since < hang->idle_since ||
          (*w.idle_since == hang->idle_since && global_rank < hang->global_rank)) {
        hang = IdleHang{m.node_id, w.local_rank, global_rank, *w.idle_since, all_idle_since};
      }
    }
  }
  return hang;
}

std::string DescribeIdleHang(const IdleHang& hang, absl::Time now) {
  return absl::StrFormat(
      "hang: no CPU or I/O for %.1f s on any rank of the job; rank %d (node '%s') stopped first, "
      "%.1f s ago",
      absl::ToDoubleSeconds(now - hang.all_idle_since), hang.global_rank, hang.node_id,
      absl::ToDoubleSeconds(now - hang.idle_since));
}

}  // namespace ddp::rendezvous
