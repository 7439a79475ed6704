#include "coordinator/commit/testing/split_state_store.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ddp::commit {
namespace {

absl::Status Absent(const char* part) {
  return absl::InvalidArgumentError(
      absl::StrCat("this store keeps no ", part, " state; the batch's ", part, " part is refused"));
}

}  // namespace

absl::Status SplitStateStore::CommitState(const StateBatch& batch) {
  if (batch.kv && kv_ == nullptr) return Absent("KV");
  if (!batch.jobs.empty() && jobs_ == nullptr) return Absent("job");
  if (!batch.nodes.empty()) return Absent("node");
  if (batch.quarantine_policy) return Absent("quarantine policy");
  if (!batch.jobs.empty()) {
    DDP_RETURN_IF_ERROR(jobs_->ApplyBatch(batch.jobs));
  }
  return batch.kv ? kv_->Commit(*batch.kv) : absl::OkStatus();
}

absl::StatusOr<kv::PersistedKvState> SplitStateStore::Load() {
  if (kv_ == nullptr) return kv::PersistedKvState{};
  return kv_->Load();
}

absl::StatusOr<std::vector<kv::Event>> SplitStateStore::ReadEvents(const std::string& ns,
                                                                   const std::string& prefix,
                                                                   kv::Revision from_revision,
                                                                   size_t max_events) {
  if (kv_ == nullptr) return std::vector<kv::Event>{};
  return kv_->ReadEvents(ns, prefix, from_revision, max_events);
}

absl::Status SplitStateStore::Compact(kv::Revision revision) {
  if (kv_ == nullptr) return Absent("KV");
  return kv_->Compact(revision);
}

absl::StatusOr<std::vector<rendezvous::JobSnapshot>> SplitStateStore::LoadAll() const {
  if (jobs_ == nullptr) return std::vector<rendezvous::JobSnapshot>{};
  return jobs_->LoadAll();
}

absl::StatusOr<rendezvous::JobEventCounts> SplitStateStore::LoadEventCounts() const {
  if (jobs_ == nullptr) return rendezvous::JobEventCounts{};
  return jobs_->LoadEventCounts();
}

absl::StatusOr<std::vector<v1::Node>> SplitStateStore::LoadNodes() const {
  return std::vector<v1::Node>{};
}

absl::StatusOr<std::optional<v1::QuarantinePolicy>> SplitStateStore::LoadQuarantinePolicy() const {
  return std::nullopt;
}

}  // namespace ddp::commit
