#include "coordinator/rendezvous/stop_barrier.h"

#include <algorithm>

namespace ddp::rendezvous {

void StopBarrier::Open(const std::vector<std::string>& members, absl::Time deadline) {
  members_.clear();
  awaited_.clear();
  for (const std::string& id : members) {
    if (id.empty() || !awaited_.insert(id).second) continue;
    members_.push_back(id);
  }
  deadline_ = deadline;
}

void StopBarrier::Close() {
  members_.clear();
  awaited_.clear();
  deadline_ = absl::InfiniteFuture();
}

bool StopBarrier::Confirm(const std::string& node_id) { return awaited_.erase(node_id) > 0; }

std::vector<std::string> StopBarrier::Awaited() const {
  std::vector<std::string> out;
  for (const std::string& id : members_) {
    if (awaited_.contains(id)) out.push_back(id);
  }
  return out;
}

void StopBarrier::FenceUntil(absl::Time until) { fenced_until_ = std::max(fenced_until_, until); }

}  // namespace ddp::rendezvous
