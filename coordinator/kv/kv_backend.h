#ifndef DDP_COORDINATOR_KV_KV_BACKEND_H_
#define DDP_COORDINATOR_KV_KV_BACKEND_H_

// Durable storage under the key-value store. The KvStore core owns all semantics
// (revisions, conditions, leases, watches); a backend only persists the result of each
// group-committed batch and gives it back after a restart. Two implementations pass one
// conformance suite: InMemoryKvBackend (tests, --standalone without a data dir) and
// SqliteKvBackend (production; WAL, synchronous=FULL).
//
// Thread-safety: a backend is used by one writer thread (the KvStore committer) plus
// any number of concurrent ReadEvents callers (watch catch-up). Implementations must
// allow ReadEvents concurrently with Commit.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/kv/key_space.h"
#include "coordinator/kv/kv_types.h"

namespace ddp::kv {

// Everything a KvStore needs to rebuild its in-memory state after a restart.
struct PersistedKvState {
  Revision revision = 0;            // last committed revision (0 for a new store)
  Revision compacted_revision = 0;  // events with revision <= this are gone
  LeaseId next_lease_id = 1;        // the next lease id to hand out
  KeySpace keys;                    // every live key
  std::vector<LeaseRecord> leases;  // every live lease, any order
};

// The durable effect of one group commit: all of it becomes durable, or none of it.
struct KvWriteBatch {
  // The store's revision after this batch; strictly greater than the previous batch's.
  Revision revision = 0;
  // Keys created or overwritten (full new record).
  std::vector<KeyValue> upserts;
  // Keys removed: (namespace, key).
  std::vector<std::pair<std::string, std::string>> deletes;
  // History appended for watchers, in order; every event's revision is in
  // (previous batch's revision, revision].
  std::vector<Event> events;
  std::vector<LeaseRecord> lease_grants;
  std::vector<LeaseId> lease_revokes;
  // The next lease id to hand out after this batch (0: unchanged).
  LeaseId next_lease_id = 0;
};

class KvBackend {
 public:
  virtual ~KvBackend() = default;

  // Reads the whole persisted state. Called once, before any Commit.
  // Errors: DATA_LOSS if the stored data is corrupt; UNAVAILABLE on I/O failure.
  virtual absl::StatusOr<PersistedKvState> Load() = 0;

  // Applies `batch` atomically and durably: when this returns OK the batch survives
  // kill -9 and power loss (SQLite: one transaction, fsync'd). On error nothing of the
  // batch is applied. Upserts and deletes of one batch never name the same key twice.
  // Errors: INVALID_ARGUMENT if batch.revision does not exceed the last committed
  // revision; UNAVAILABLE on I/O failure.
  virtual absl::Status Commit(const KvWriteBatch& batch) = 0;

  // Returns up to `max_events` events of namespace `ns` whose key starts with `prefix`
  // and whose revision is >= `from_revision`, in revision order (and in batch order
  // within a revision). Events with revision <= compacted revision are never returned.
  // Errors: OUT_OF_RANGE if from_revision <= compacted revision (those are gone).
  virtual absl::StatusOr<std::vector<Event>> ReadEvents(const std::string& ns,
                                                        const std::string& prefix,
                                                        Revision from_revision,
                                                        size_t max_events) = 0;

  // Drops the history of every revision <= `revision` (it must not exceed the last
  // committed revision). Compacting to a revision at or below the current compacted
  // revision is a no-op. Durable on return.
  // Errors: INVALID_ARGUMENT if revision > last committed revision.
  virtual absl::Status Compact(Revision revision) = 0;
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_KV_BACKEND_H_
