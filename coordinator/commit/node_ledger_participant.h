#ifndef DDP_COORDINATOR_COMMIT_NODE_LEDGER_PARTICIPANT_H_
#define DDP_COORDINATOR_COMMIT_NODE_LEDGER_PARTICIPANT_H_

// Joins the fleet's NodeLedger (fleet/node_ledger.h) to the commit loop: the
// records it changed become the node part of the loop's batches (one
// transaction with the KV and job changes), written behind like the jobs'.
//
//   Prepare  (commit thread)  the ledger's dirty records (and its policy,
//                             when set) go into the batch,
//                             with the WhenDurable callbacks queued so far
//   Finish   (commit thread)  OK: the callbacks become sends; a failure gives
//                             the records back (dirty again) and keeps the
//                             callbacks for the next batch
//
// Thread-safety: thread-safe.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/commit/commit_loop.h"
#include "coordinator/fleet/node_ledger.h"

namespace ddp::commit {

class NodeLedgerParticipant final : public CommitParticipant {
 public:
  // Restores the ledger from loop.store() and joins `loop` (not started yet);
  // options.on_change is replaced (it wakes the loop). The participant must
  // outlive the loop's threads (Shutdown the loop first), `clock` the ledger.
  // Errors: StateStore::LoadNodes's and LoadQuarantinePolicy's, DATA_LOSS (a
  // stored policy out of range).
  static absl::StatusOr<std::unique_ptr<NodeLedgerParticipant>> Open(
      CommitLoop& loop, const Clock& clock, fleet::NodeLedgerOptions options);

  fleet::NodeLedger& ledger() { return *ledger_; }
  // Runs `done` on the delivery thread once every ledger change made before
  // the call is durable (a reply to CordonNode, say).
  void WhenDurable(std::function<void()> done);

  bool Prepare(StateBatch& batch) override;
  void Finish(const absl::Status& status, StateBatch& batch, Sends& sends) override;

 private:
  explicit NodeLedgerParticipant(CommitLoop& loop) : loop_(loop) {}

  CommitLoop& loop_;
  std::unique_ptr<fleet::NodeLedger> ledger_;
  absl::Mutex mu_;
  std::vector<std::function<void()>> waiting_ ABSL_GUARDED_BY(mu_);
  // Commit thread only: the callbacks of the batch between Prepare and Finish.
  std::vector<std::function<void()>> in_flight_;
};

}  // namespace ddp::commit

#endif  // DDP_COORDINATOR_COMMIT_NODE_LEDGER_PARTICIPANT_H_
