#ifndef DDP_COORDINATOR_KV_LEASE_TABLE_H_
#define DDP_COORDINATOR_KV_LEASE_TABLE_H_

// The committed leases of the key-value store: TTL, in-memory deadline and the
// keys attached to each lease. Deadlines are never persisted: after a restart
// every lease is granted a full TTL again.
//
// Lifecycle of a lease:
//
//   Grant --> live --(deadline passed: CollectExpired)--> expiring
//              ^  \__ KeepAlive: new deadline               |  |
//              |                                            |  Remove --> gone
//              +------ ClearExpiring (revoke failed) -------+
//
// An expiring lease still exists (its keys are not yet deleted) but refuses
// KeepAlive.
//
// Each lease has an owner namespace ("" for none; see lease_ownership.h),
// checked by KeepAlive against the caller.
//
// Thread-safety: not thread-safe; the KvStore calls it under its state mutex.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/kv/kv_types.h"

namespace ddp::kv {

class LeaseTable {
 public:
  using KeyRef = std::pair<std::string, std::string>;  // (namespace, key)
  using KeySet = absl::flat_hash_set<KeyRef>;

  // Adds (or replaces) lease `id` of namespace `owner` ("": none) expiring at
  // now + ttl_ms.
  void Grant(LeaseId id, int64_t ttl_ms, const std::string& owner, absl::Time now);
  bool Contains(LeaseId id) const { return leases_.contains(id); }
  // The owner namespace of lease `id` ("" for none, or an unknown lease).
  const std::string& Owner(LeaseId id) const;
  // Sets the owner of an existing lease (loading a store).
  void SetOwner(LeaseId id, const std::string& owner);
  // Moves the deadline to now + TTL and returns the TTL.
  // Errors: NOT_FOUND if the lease does not exist or is expiring;
  // PERMISSION_DENIED if `caller` may not act on it.
  absl::StatusOr<int64_t> KeepAlive(LeaseId id, const LeaseCaller& caller, absl::Time now);
  void Remove(LeaseId id);

  // What `lease timetolive` shows of one lease.
  struct TimeToLive {
    int64_t remaining_ms = 0;  // 0 when due
    int64_t granted_ttl_ms = 0;
  };
  // Errors: as KeepAlive (NOT_FOUND, PERMISSION_DENIED); changes nothing.
  absl::StatusOr<TimeToLive> TimeLeft(LeaseId id, const LeaseCaller& caller, absl::Time now) const;
  // The ids of the live leases `caller` may act on, ascending.
  std::vector<LeaseId> IdsFor(const LeaseCaller& caller) const;

  void AttachKey(LeaseId id, const std::string& ns, const std::string& key);
  void DetachKey(LeaseId id, const std::string& ns, const std::string& key);
  // Keys attached to `id`; empty for an unknown lease.
  const KeySet& Keys(LeaseId id) const;

  // Marks every live lease whose deadline is <= now as expiring and returns
  // them.
  std::vector<LeaseId> CollectExpired(absl::Time now);
  // Makes an expiring lease live again with a fresh deadline (its revoke
  // failed).
  void ClearExpiring(LeaseId id, absl::Time now);

  size_t size() const { return leases_.size(); }
  // Calls `visit` with the id of every lease, in no order.
  template <typename Visit>
  void ForEach(Visit visit) const {
    for (const auto& [id, lease] : leases_) visit(id);
  }

 private:
  struct Lease {
    int64_t ttl_ms = 0;
    std::string owner;
    absl::Time deadline;
    bool expiring = false;
    KeySet keys;
  };

  absl::flat_hash_map<LeaseId, Lease> leases_;
  // Live (not expiring) leases by deadline.
  absl::btree_set<std::pair<absl::Time, LeaseId>> by_deadline_;
  const KeySet empty_;
  const std::string no_owner_;
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_LEASE_TABLE_H_
