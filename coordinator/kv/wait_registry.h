#ifndef DDP_COORDINATOR_KV_WAIT_REGISTRY_H_
#define DDP_COORDINATOR_KV_WAIT_REGISTRY_H_

// Pending Wait calls (TCPStore's wait): each waits until every one of its keys
// has been put, or its deadline passes. The registry never runs callbacks
// itself: it hands the finished ones back to the caller, which runs them after
// releasing its locks.
//
// Thread-safety: not thread-safe; the KvStore calls it under its state mutex,
// so that "check which keys exist, then register" is atomic with respect to
// publishing writes.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ddp::kv {

class WaitRegistry {
 public:
  // Receives OK once all keys exist, DEADLINE_EXCEEDED or UNAVAILABLE
  // otherwise.
  using Callback = std::function<void(absl::Status)>;
  using Finished = std::vector<std::pair<Callback, absl::Status>>;

  // Registers a wait for `missing_keys` (non-empty) of namespace `ns`.
  // Errors: RESOURCE_EXHAUSTED when `max_pending` waits are already registered.
  absl::Status Add(const std::string& ns, std::vector<std::string> missing_keys,
                   absl::Time deadline, absl::Duration timeout, Callback done, size_t max_pending);

  // Records that (ns, key) now exists; waits that have all their keys go to
  // `finished`.
  void OnKeyPut(const std::string& ns, const std::string& key, Finished* finished);

  // Moves every wait whose deadline is <= now to `finished` with
  // DEADLINE_EXCEEDED.
  void Expire(absl::Time now, Finished* finished);

  // Removes every wait, each with `status` (shutdown).
  void CancelAll(const absl::Status& status, Finished* finished);

  size_t size() const { return waiters_.size(); }

 private:
  using KeyRef = std::pair<std::string, std::string>;
  struct Waiter {
    std::string ns;
    absl::flat_hash_set<std::string> missing;
    size_t total_keys = 0;
    absl::Time deadline;
    absl::Duration timeout;
    Callback done;
  };

  // Unlinks waiter `id` from the indexes and returns its callback.
  Callback RemoveWaiter(uint64_t id);

  uint64_t next_id_ = 1;
  absl::flat_hash_map<uint64_t, Waiter> waiters_;
  absl::flat_hash_map<KeyRef, std::vector<uint64_t>> by_key_;
  absl::btree_set<std::pair<absl::Time, uint64_t>> by_deadline_;
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_WAIT_REGISTRY_H_
