#ifndef DDP_COORDINATOR_STORAGE_MEMORY_STATE_STORE_H_
#define DDP_COORDINATOR_STORAGE_MEMORY_STATE_STORE_H_

// A StateStore in memory: for tests, and for a coordinator that keeps nothing
// (an in-process test server). A batch is checked whole before any of it is
// applied, so it is all or nothing like SqliteStateStore's transaction.
//
// Thread-safety: thread-safe.

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/commit/state_store.h"
#include "coordinator/storage/memory_kv_backend.h"

namespace ddp::storage {

class MemoryStateStore final : public commit::StateStore {
 public:
  absl::Status CommitState(const commit::StateBatch& batch) override;
  absl::StatusOr<kv::PersistedKvState> Load() override { return kv_.Load(); }
  absl::StatusOr<std::vector<kv::Event>> ReadEvents(const std::string& ns,
                                                    const std::string& prefix,
                                                    kv::Revision from_revision,
                                                    size_t max_events) override {
    return kv_.ReadEvents(ns, prefix, from_revision, max_events);
  }
  absl::Status Compact(kv::Revision revision) override { return kv_.Compact(revision); }
  absl::StatusOr<std::vector<rendezvous::JobSnapshot>> LoadAll() const override {
    return jobs_.LoadAll();
  }
  absl::StatusOr<rendezvous::JobEventCounts> LoadEventCounts() const override {
    return jobs_.LoadEventCounts();
  }
  absl::StatusOr<std::vector<v1::Node>> LoadNodes() const override;
  absl::StatusOr<std::optional<v1::QuarantinePolicy>> LoadQuarantinePolicy() const override;

  // Test hooks: every later CommitState fails with `status` (nothing applied)
  // until given OkStatus(); how many batches were committed.
  void FailWith(absl::Status status);
  int commit_count() const;

 private:
  mutable absl::Mutex mu_;
  absl::Status fail_with_ ABSL_GUARDED_BY(mu_);
  int commits_ ABSL_GUARDED_BY(mu_) = 0;
  kv::Revision revision_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, v1::Node> nodes_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::QuarantinePolicy> quarantine_policy_ ABSL_GUARDED_BY(mu_);
  kv::InMemoryKvBackend kv_;
  rendezvous::InMemoryJobStateStore jobs_;
};

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_MEMORY_STATE_STORE_H_
