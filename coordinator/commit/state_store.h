#ifndef DDP_COORDINATOR_COMMIT_STATE_STORE_H_
#define DDP_COORDINATOR_COMMIT_STATE_STORE_H_

// The one durable store of the coordinator: the KV state and the job state in
// one place, changed only by whole batches (StateBatch), each one transaction.
// The commit loop (commit_loop.h) is its only writer. Shaped so that a
// replicated engine can stand behind it: one ordered batch per commit, nothing
// of SQLite in the interface.
//
// Besides, it keeps the fleet's node records (StateBatch::nodes, LoadNodes)
// and the cluster's quarantine policy once set through the API
// (StateBatch::quarantine_policy, LoadQuarantinePolicy).
//
// A StateStore is a kv::KvBackend (Load, ReadEvents, Compact for the KvStore)
// and a rendezvous::JobStateStore (LoadAll to restore the jobs); their own
// write methods are CommitState with half a batch, so every conformance test
// of either interface runs against it unchanged.
//
// Implementations: storage::SqliteStateStore (DATA_DIR/coordinator.db),
// storage::MemoryStateStore (tests).
//
// Thread-safety: CommitState from one thread at a time (the commit loop);
// ReadEvents concurrently with it.

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/kv/kv_backend.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "ddp/v1/nodes.pb.h"

namespace ddp::commit {

// Everything one commit makes durable, all or nothing.
struct StateBatch {
  // The KV part; none when the batch changes no key or lease.
  std::optional<kv::KvWriteBatch> kv;
  // Job changes, in the order they were made.
  std::vector<rendezvous::JobChanges> jobs;
  // The fleet's node records (fleet/node_ledger.h) that changed, whole; by
  // node id, last one wins. Never removed.
  std::vector<v1::Node> nodes;
  // The cluster's quarantine policy, when it was set (replaces the stored one).
  std::optional<v1::QuarantinePolicy> quarantine_policy;

  bool empty() const { return !kv && jobs.empty() && nodes.empty() && !quarantine_policy; }
};

class StateStore : public kv::KvBackend, public rendezvous::JobStateStore {
 public:
  // Makes `batch` durable in one transaction: when this returns OK it survives
  // kill -9 and power loss; on error nothing of it is applied, except where the
  // error says the outcome is unknown. Possible errors: INVALID_ARGUMENT (a KV
  // revision that does not exceed the last one; node changes for a job without
  // a record), UNAVAILABLE (nothing applied; retry), UNKNOWN (the commit itself
  // failed: it may or may not be durable), DATA_LOSS.
  virtual absl::Status CommitState(const StateBatch& batch) = 0;

  // kv::KvBackend and rendezvous::JobStateStore writes: half a batch each.
  absl::Status Commit(const kv::KvWriteBatch& batch) final {
    return CommitState(StateBatch{batch, {}, {}, {}});
  }
  absl::Status Apply(const rendezvous::JobChanges& changes) final {
    return CommitState(StateBatch{std::nullopt, {changes}, {}, {}});
  }
  absl::Status ApplyBatch(const std::vector<rendezvous::JobChanges>& batch) final {
    return CommitState(StateBatch{std::nullopt, batch, {}, {}});
  }

  // Every stored node record (the fleet's ledger), by node id. Possible
  // errors: UNAVAILABLE, DATA_LOSS (a record that does not decode).
  virtual absl::StatusOr<std::vector<v1::Node>> LoadNodes() const = 0;
  // The quarantine policy last committed; nullopt: never set. Possible
  // errors: UNAVAILABLE, DATA_LOSS (a record that does not decode).
  virtual absl::StatusOr<std::optional<v1::QuarantinePolicy>> LoadQuarantinePolicy() const = 0;
};

}  // namespace ddp::commit

#endif  // DDP_COORDINATOR_COMMIT_STATE_STORE_H_
