#include "coordinator/storage/memory_kv_backend.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "common/status_macros.h"
#include "coordinator/storage/write_batch_checks.h"

namespace ddp::kv {

absl::StatusOr<PersistedKvState> InMemoryKvBackend::Load() {
  absl::MutexLock lock(&mu_);
  PersistedKvState state;
  state.revision = revision_;
  state.compacted_revision = compacted_revision_;
  state.next_lease_id = next_lease_id_;
  for (const auto& [ref, kv] : keys_) state.keys.Upsert(kv);
  state.leases.reserve(leases_.size());
  for (const auto& [id, lease] : leases_) state.leases.push_back(lease);
  return state;
}

absl::Status InMemoryKvBackend::Commit(const KvWriteBatch& batch) {
  absl::MutexLock lock(&mu_);
  DDP_RETURN_IF_ERROR(CheckWriteBatch(batch, revision_));
  for (const KeyValue& kv : batch.upserts) keys_[{kv.ns, kv.key}] = kv;
  for (const auto& ref : batch.deletes) keys_.erase(ref);
  for (const Event& event : batch.events) events_by_ns_[event.kv.ns].push_back(event);
  for (const LeaseRecord& lease : batch.lease_grants) leases_[lease.id] = lease;
  for (LeaseId id : batch.lease_revokes) leases_.erase(id);
  if (batch.next_lease_id != 0) next_lease_id_ = batch.next_lease_id;
  revision_ = batch.revision;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Event>> InMemoryKvBackend::ReadEvents(const std::string& ns,
                                                                 const std::string& prefix,
                                                                 Revision from_revision,
                                                                 size_t max_events) {
  absl::MutexLock lock(&mu_);
  DDP_RETURN_IF_ERROR(CheckReadFrom(from_revision, compacted_revision_));
  std::vector<Event> out;
  auto it = events_by_ns_.find(ns);
  if (it == events_by_ns_.end()) return out;
  const std::deque<Event>& events = it->second;
  auto first = std::lower_bound(
      events.begin(), events.end(), from_revision,
      [](const Event& event, Revision revision) { return event.revision() < revision; });
  for (; first != events.end() && out.size() < max_events; ++first) {
    if (absl::StartsWith(first->kv.key, prefix)) out.push_back(*first);
  }
  return out;
}

absl::Status InMemoryKvBackend::Compact(Revision revision) {
  absl::MutexLock lock(&mu_);
  DDP_RETURN_IF_ERROR(CheckCompactRevision(revision, revision_));
  if (revision <= compacted_revision_) return absl::OkStatus();
  compacted_revision_ = revision;
  for (auto it = events_by_ns_.begin(); it != events_by_ns_.end();) {
    std::deque<Event>& events = it->second;
    while (!events.empty() && events.front().revision() <= revision) events.pop_front();
    it = events.empty() ? events_by_ns_.erase(it) : std::next(it);
  }
  return absl::OkStatus();
}

}  // namespace ddp::kv
