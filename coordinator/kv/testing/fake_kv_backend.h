#ifndef DDP_COORDINATOR_KV_TESTING_FAKE_KV_BACKEND_H_
#define DDP_COORDINATOR_KV_TESTING_FAKE_KV_BACKEND_H_

// A hand-written in-memory KvBackend for unit tests of the core components,
// with two test hooks: fail the next commits, and count commits (group-commit
// checks).
//
// Thread-safety: thread-safe.

#include <atomic>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/kv/kv_backend.h"

namespace ddp::kv::testing {

class FakeKvBackend : public KvBackend {
 public:
  absl::StatusOr<PersistedKvState> Load() override {
    absl::MutexLock lock(&mu_);
    PersistedKvState state;
    state.revision = state_.revision;
    state.compacted_revision = state_.compacted_revision;
    state.next_lease_id = state_.next_lease_id;
    for (const auto& [ref, kv] : keys_) state.keys.Upsert(kv);
    for (const auto& [id, lease] : leases_) state.leases.push_back(lease);
    return state;
  }

  absl::Status Commit(const KvWriteBatch& batch) override {
    absl::MutexLock lock(&mu_);
    ++commits_;
    bool applied_but_unknown = false;
    if (fail_commits_ > 0) {
      --fail_commits_;
      // UNKNOWN models a COMMIT whose fsync failed after the data reached the
      // file: the batch is applied, yet the caller is told the outcome is unknown.
      if (fail_with_.code() != absl::StatusCode::kUnknown) return fail_with_;
      applied_but_unknown = true;
    }
    if (batch.revision <= state_.revision) return absl::InvalidArgumentError("old revision");
    for (const auto& kv : batch.upserts) keys_[{kv.ns, kv.key}] = kv;
    for (const auto& ref : batch.deletes) keys_.erase(ref);
    for (const auto& lease : batch.lease_grants) leases_[lease.id] = lease;
    for (LeaseId id : batch.lease_revokes) leases_.erase(id);
    events_.insert(events_.end(), batch.events.begin(), batch.events.end());
    state_.revision = batch.revision;
    if (batch.next_lease_id != 0) state_.next_lease_id = batch.next_lease_id;
    return applied_but_unknown ? fail_with_ : absl::OkStatus();
  }

  absl::StatusOr<std::vector<Event>> ReadEvents(const std::string& ns, const std::string& prefix,
                                                Revision from, size_t max_events) override {
    absl::MutexLock lock(&mu_);
    if (from <= state_.compacted_revision) return absl::OutOfRangeError("compacted");
    std::vector<Event> out;
    for (const Event& e : events_) {
      if (out.size() >= max_events) break;
      if (e.revision() >= from && e.kv.ns == ns && absl::StartsWith(e.kv.key, prefix)) {
        out.push_back(e);
      }
    }
    return out;
  }

  absl::Status Compact(Revision revision) override {
    absl::MutexLock lock(&mu_);
    if (revision > state_.revision) return absl::InvalidArgumentError("future");
    if (revision <= state_.compacted_revision) return absl::OkStatus();
    state_.compacted_revision = revision;
    std::vector<Event> kept;
    for (const Event& e : events_) {
      if (e.revision() > revision) kept.push_back(e);
    }
    events_ = std::move(kept);
    return absl::OkStatus();
  }

  // The next `n` commits fail with `status`; an UNKNOWN status applies the
  // batch first (its outcome really was "done" though reported as unknown).
  void FailNextCommits(int n,
                       absl::Status status = absl::UnavailableError("injected commit failure")) {
    absl::MutexLock lock(&mu_);
    fail_commits_ = n;
    fail_with_ = status;
  }
  int commits() const {
    absl::MutexLock lock(&mu_);
    return commits_;
  }
  // True once Commit has been called `n` times (within `timeout`).
  bool AwaitCommits(int n, absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    const auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return commits_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

 private:
  mutable absl::Mutex mu_;
  PersistedKvState state_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, KeyValue> keys_ ABSL_GUARDED_BY(mu_);
  std::map<LeaseId, LeaseRecord> leases_ ABSL_GUARDED_BY(mu_);
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  int fail_commits_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status fail_with_ ABSL_GUARDED_BY(mu_);
  int commits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ddp::kv::testing

#endif  // DDP_COORDINATOR_KV_TESTING_FAKE_KV_BACKEND_H_
