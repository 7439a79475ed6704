#ifndef DDP_COORDINATOR_COMMIT_TESTING_SPLIT_STATE_STORE_H_
#define DDP_COORDINATOR_COMMIT_TESTING_SPLIT_STATE_STORE_H_

// A StateStore over a KV backend and a job store kept apart, either of which
// may be absent: what a KvStore or a RendezvousService commits through when it
// runs its own CommitLoop (unit tests, tools, the rendezvous stand-in). A batch
// that names a part whose store is absent is refused (INVALID_ARGUMENT); with
// both present a batch holding both parts is two commits, not one, so the
// coordinator uses a real StateStore (storage/sqlite_state_store.h) instead.
//
// Thread-safety: as the stores it wraps.

#include <vector>

#include "coordinator/commit/state_store.h"

namespace ddp::commit {

class SplitStateStore final : public StateStore {
 public:
  // Either may be null; both must outlive this object.
  SplitStateStore(kv::KvBackend* kv, rendezvous::JobStateStore* jobs) : kv_(kv), jobs_(jobs) {}

  absl::Status CommitState(const StateBatch& batch) override;
  // Without a KV backend: an empty store; without a job store: no jobs.
  absl::StatusOr<kv::PersistedKvState> Load() override;
  absl::StatusOr<std::vector<kv::Event>> ReadEvents(const std::string& ns,
                                                    const std::string& prefix,
                                                    kv::Revision from_revision,
                                                    size_t max_events) override;
  absl::Status Compact(kv::Revision revision) override;
  absl::StatusOr<std::vector<rendezvous::JobSnapshot>> LoadAll() const override;
  absl::StatusOr<rendezvous::JobEventCounts> LoadEventCounts() const override;
  // No node records (a batch with some is refused): none.
  absl::StatusOr<std::vector<v1::Node>> LoadNodes() const override;
  // No policy either (a batch with one is refused): never set.
  absl::StatusOr<std::optional<v1::QuarantinePolicy>> LoadQuarantinePolicy() const override;

 private:
  kv::KvBackend* const kv_;
  rendezvous::JobStateStore* const jobs_;
};

}  // namespace ddp::commit

#endif  // DDP_COORDINATOR_COMMIT_TESTING_SPLIT_STATE_STORE_H_
