#include "coordinator/ha/leader_changes.h"

namespace ddp::ha {

bool LeaderChanges::Observe(const v1::CoordinatorInfo& leader) {
  if (leader.name().empty()) return false;  // none elected
  absl::MutexLock lock(&mu_);
  if (leader.name() == last_leader_) return false;  // the same one, seen again
  last_leader_ = leader.name();
  ++count_;
  return true;
}

int64_t LeaderChanges::count() const {
  absl::MutexLock lock(&mu_);
  return count_;
}

}  // namespace ddp::ha
