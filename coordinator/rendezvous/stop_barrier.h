#ifndef DDP_COORDINATOR_RENDEZVOUS_STOP_BARRIER_H_
#define DDP_COORDINATOR_RENDEZVOUS_STOP_BARRIER_H_

// The stop barrier of a restart (the TSL coordination service's BarrierState,
// for one purpose): before the next generation forms, every member of the
// stopped one must confirm that its workers are gone (WorkersStopped, a
// resume saying its lease ran out, or its removal), within a deadline; and no
// generation forms before the leases of members that left while their workers
// could still run have run out (the fence).
//
// Plain value type; Job owns one and calls it under the registry's lock.

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"

namespace ddp::rendezvous {

class StopBarrier {
 public:
  // A barrier that awaits `members` (node ids) until `deadline`.
  void Open(const std::vector<std::string>& members, absl::Time deadline);
  // No barrier: nothing awaited, no deadline. The fence stays.
  void Close();

  // `node_id`'s workers are stopped. Returns true when it was awaited.
  bool Confirm(const std::string& node_id);
  bool Awaits(const std::string& node_id) const { return awaited_.contains(node_id); }
  // Every member confirmed.
  bool complete() const { return awaited_.empty(); }
  absl::Time deadline() const { return deadline_; }
  // The members still awaited, in the order Open was given them.
  std::vector<std::string> Awaited() const;

  // The deadline moves `by` later (the coordinator stalled); the fence stays.
  void Postpone(absl::Duration by) {
    if (deadline_ != absl::InfiniteFuture()) deadline_ += by;
  }

  // No generation forms before `until` (kept when later than the fence).
  void FenceUntil(absl::Time until);
  absl::Time fenced_until() const { return fenced_until_; }

 private:
  std::vector<std::string> members_;  // as opened, for Awaited()'s order
  absl::flat_hash_set<std::string> awaited_;
  absl::Time deadline_ = absl::InfiniteFuture();
  absl::Time fenced_until_ = absl::InfinitePast();
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_STOP_BARRIER_H_
