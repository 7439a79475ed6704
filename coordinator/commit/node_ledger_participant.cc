#include "coordinator/commit/node_ledger_participant.h"

#include <utility>

#include "common/status_macros.h"

namespace ddp::commit {

absl::StatusOr<std::unique_ptr<NodeLedgerParticipant>> NodeLedgerParticipant::Open(
    CommitLoop& loop, const Clock& clock, fleet::NodeLedgerOptions options) {
  DDP_ASSIGN_OR_RETURN(std::vector<v1::Node> stored, loop.store().LoadNodes());
  DDP_ASSIGN_OR_RETURN(std::optional<v1::QuarantinePolicy> policy,
                       loop.store().LoadQuarantinePolicy());
  std::unique_ptr<NodeLedgerParticipant> participant(new NodeLedgerParticipant(loop));
  options.on_change = [&loop] { loop.Notify(); };
  participant->ledger_ = std::make_unique<fleet::NodeLedger>(clock, std::move(options));
  DDP_RETURN_IF_ERROR(participant->ledger_->Restore(std::move(stored), std::move(policy)));
  loop.Add(participant.get());
  return participant;
}

void NodeLedgerParticipant::WhenDurable(std::function<void()> done) {
  {
    absl::MutexLock lock(&mu_);
    waiting_.push_back(std::move(done));
  }
  loop_.Notify();
}

bool NodeLedgerParticipant::Prepare(StateBatch& batch) {
  batch.nodes = ledger_->TakeDirty();
  batch.quarantine_policy = ledger_->TakeDirtyPolicy();
  absl::MutexLock lock(&mu_);
  for (auto& done : waiting_) in_flight_.push_back(std::move(done));
  waiting_.clear();
  return false;
}

void NodeLedgerParticipant::Finish(const absl::Status& status, StateBatch& batch, Sends& sends) {
  if (!status.ok()) {
    std::vector<std::string> ids;
    for (const v1::Node& node : batch.nodes) ids.push_back(node.node_id());
    ledger_->MarkDirty(ids);
    batch.nodes.clear();
    if (batch.quarantine_policy) ledger_->MarkPolicyDirty();
    batch.quarantine_policy.reset();
    return;  // in_flight_ waits for the next batch
  }
  for (auto& done : in_flight_) sends.push_back(std::move(done));
  in_flight_.clear();
}

}  // namespace ddp::commit
