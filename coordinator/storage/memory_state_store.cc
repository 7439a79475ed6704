#include "coordinator/storage/memory_state_store.h"

#include "common/status_macros.h"
#include "coordinator/storage/write_batch_checks.h"

namespace ddp::storage {

absl::Status MemoryStateStore::CommitState(const commit::StateBatch& batch) {
  absl::MutexLock lock(&mu_);
  if (!fail_with_.ok()) return fail_with_;
  if (batch.kv) DDP_RETURN_IF_ERROR(kv::CheckWriteBatch(*batch.kv, revision_));
  // The job part is all or nothing itself; the KV part, checked, cannot fail.
  if (!batch.jobs.empty()) DDP_RETURN_IF_ERROR(jobs_.ApplyBatch(batch.jobs));
  if (batch.kv) {
    DDP_RETURN_IF_ERROR(kv_.Commit(*batch.kv));
    revision_ = batch.kv->revision;
  }
  for (const v1::Node& node : batch.nodes) nodes_[node.node_id()] = node;
  if (batch.quarantine_policy) quarantine_policy_ = batch.quarantine_policy;
  ++commits_;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Node>> MemoryStateStore::LoadNodes() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Node> out;
  for (const auto& [id, node] : nodes_) out.push_back(node);
  return out;
}

absl::StatusOr<std::optional<v1::QuarantinePolicy>> MemoryStateStore::LoadQuarantinePolicy() const {
  absl::MutexLock lock(&mu_);
  return quarantine_policy_;
}

void MemoryStateStore::FailWith(absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_with_ = std::move(status);
}

int MemoryStateStore::commit_count() const {
  absl::MutexLock lock(&mu_);
  return commits_;
}

}  // namespace ddp::storage
