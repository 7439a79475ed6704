#ifndef DDP_COORDINATOR_HA_LEADER_CHANGES_H_
#define DDP_COORDINATOR_HA_LEADER_CHANGES_H_

// Counts the leader changes one coordinator sees (ClusterStatus.leader_changes,
// ddp_coordinator_leader_changes_seen_total; etcd's
// etcd_server_leader_changes_seen_total for the coordinators): every
// coordinator seen elected counts once, the first one included, and a
// coordinator that leads again after another counts again. "None elected"
// (the key deleted, an empty info) is no change: the next leader is.
// Coordinators are told apart by CoordinatorInfo.name (hostname/pid), so one
// restarted at the same address is a new leader.
//
// Thread-safety: thread-safe.

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "ddp/v1/cluster.pb.h"

namespace ddp::ha {

class LeaderChanges {
 public:
  // `leader` leads now, as etcd said (or this coordinator was elected).
  // Returns whether that was a change.
  bool Observe(const v1::CoordinatorInfo& leader);
  int64_t count() const;

 private:
  mutable absl::Mutex mu_;
  std::string last_leader_ ABSL_GUARDED_BY(mu_);
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ddp::ha

#endif  // DDP_COORDINATOR_HA_LEADER_CHANGES_H_
