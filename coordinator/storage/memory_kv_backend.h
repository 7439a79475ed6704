#ifndef DDP_COORDINATOR_STORAGE_MEMORY_KV_BACKEND_H_
#define DDP_COORDINATOR_STORAGE_MEMORY_KV_BACKEND_H_

// A KvBackend that keeps everything in memory: for tests and for --standalone
// without a data directory. Implements the whole contract of kv_backend.h
// (history, compaction, ReadEvents) except durability: everything is gone when
// the object is.
//
// Thread-safety: thread-safe (one mutex); ReadEvents may run concurrently with
// Commit.

#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/kv/kv_backend.h"

namespace ddp::kv {

class InMemoryKvBackend final : public KvBackend {
 public:
  InMemoryKvBackend() = default;

  // Never fails.
  absl::StatusOr<PersistedKvState> Load() override;
  // Possible errors: INVALID_ARGUMENT (see CheckWriteBatch); nothing is applied
  // then.
  absl::Status Commit(const KvWriteBatch& batch) override;
  // Possible errors: OUT_OF_RANGE if from_revision <= compacted revision.
  absl::StatusOr<std::vector<Event>> ReadEvents(const std::string& ns, const std::string& prefix,
                                                Revision from_revision, size_t max_events) override;
  // Possible errors: INVALID_ARGUMENT if revision > last committed revision.
  absl::Status Compact(Revision revision) override;

 private:
  absl::Mutex mu_;
  Revision revision_ ABSL_GUARDED_BY(mu_) = 0;
  Revision compacted_revision_ ABSL_GUARDED_BY(mu_) = 0;
  LeaseId next_lease_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::pair<std::string, std::string>, KeyValue> keys_ ABSL_GUARDED_BY(mu_);
  std::map<LeaseId, LeaseRecord> leases_ ABSL_GUARDED_BY(mu_);
  // History per namespace, in commit order (so sorted by revision).
  std::map<std::string, std::deque<Event>> events_by_ns_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_STORAGE_MEMORY_KV_BACKEND_H_
