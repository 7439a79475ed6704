#ifndef DDP_COORDINATOR_FLEET_NODE_LEDGER_H_
#define DDP_COORDINATOR_FLEET_NODE_LEDGER_H_

// The fleet's health ledger: per node id, across jobs, what went wrong where
// (worker failures with their cause, hangs, lost leases, failed health
// checks: job, generation, time), the node's latest health-check results, and
// its state (proto/ddp/v1/nodes.proto):
//
//   READY --Cordon--> CORDONED --Uncordon--> READY
//   READY --policy: `after` counted incidents within `window`--> QUARANTINED
//   QUARANTINED --Uncordon--> READY     QUARANTINED --Cordon--> CORDONED
//
// Admit is the gate every Register passes: it records the node (address, job,
// check results), and refuses a node that is CORDONED or QUARANTINED, or whose
// health check failed. RecordEvents feeds it the jobs' events (worker
// failures, hangs, lost nodes) once they are durable.
//
// The policy is the cluster's: options.quarantine (the coordinator's flags)
// until SetPolicy replaces it; a policy set so is stored (TakeDirtyPolicy) and
// restored (Restore), so it wins over the flags after a restart. A change
// applies from the next incident on.
//
// What counts for the policy: a failed health check, a lost lease, and a
// worker failure or hang that is the earliest the ledger knows of in its job's
// generation (the peers of a failed worker fail on the broken collective a
// moment later: those knock-ons are recorded, uncounted). When an earlier
// failure of the same generation arrives later, the count moves to it; a
// quarantine it caused stays (the operator uncordons). Uncordon uncounts every
// incident before it.
//
// Persistence: the record is the API's v1::Node itself. Every change marks
// the node dirty and calls on_change; the commit-loop adapter
// (commit/fleet_participant.h) takes the dirty records (TakeDirty) into its
// batch and gives them back when the batch fails (MarkDirty). Restore loads
// them at start.
//
// Thread-safety: thread-safe; on_change runs without the lock held.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/rendezvous/job_types.h"
#include "ddp/v1/nodes.pb.h"

namespace ddp::fleet {

struct QuarantinePolicy {
  // Counted incidents within `window` that quarantine a node; 0: never.
  int after = 0;
  absl::Duration window = absl::Hours(1);
};

// Validates a policy from the command line or the API: after in
// [0, kMaxQuarantineAfter], and a window between 1 s and 30 days when after >
// 0. INVALID_ARGUMENT naming the value and the limit.
inline constexpr int kMaxQuarantineAfter = 1'000'000;
absl::Status ValidateQuarantinePolicy(const QuarantinePolicy& policy);

// The API's form (nodes.proto QuarantinePolicy), and back: window_ms 0 with
// after 0 is the default window. INVALID_ARGUMENT as ValidateQuarantinePolicy.
v1::QuarantinePolicy QuarantinePolicyToProto(const QuarantinePolicy& policy);
absl::StatusOr<QuarantinePolicy> QuarantinePolicyFromProto(int64_t after, int64_t window_ms);

struct NodeLedgerOptions {
  QuarantinePolicy quarantine;
  // Incidents kept per node (the newest); incident_count counts them all.
  int max_incidents_per_node = 64;
  // Nodes the ledger records; Admit of one more is RESOURCE_EXHAUSTED.
  int max_nodes = 100'000;
  // Health checks per Register, and the bounds of their fields (the agent's
  // input, checked here before anything is stored).
  int max_checks = 16;
  int max_check_name_bytes = 64;
  // Longer check output is cut to its last max_check_output_bytes.
  int max_check_output_bytes = 4096;
  // A node id or reason longer than this is refused.
  int max_id_bytes = 256;
  int max_reason_bytes = 1024;
  // Something changed (a record is dirty): wake the commit loop.
  std::function<void()> on_change;
};

class NodeLedger {
 public:
  // `clock` must outlive the ledger.
  NodeLedger(const Clock& clock, NodeLedgerOptions options);
  NodeLedger(const NodeLedger&) = delete;
  NodeLedger& operator=(const NodeLedger&) = delete;

  // Before serving: the stored records (replaces what the ledger holds) and
  // the stored policy, if one was ever set (else options.quarantine stays).
  // DATA_LOSS: a stored policy out of range.
  absl::Status Restore(std::vector<v1::Node> nodes,
                       std::optional<v1::QuarantinePolicy> policy = std::nullopt);

  // The policy in force (set_unix_ms 0: options.quarantine's).
  v1::QuarantinePolicy Policy() const;
  // Replaces the policy, stamped now, and marks it for storing.
  // INVALID_ARGUMENT: as ValidateQuarantinePolicy.
  absl::StatusOr<v1::QuarantinePolicy> SetPolicy(const QuarantinePolicy& policy);

  // A node registers for `job_id` from `address`, after running `checks`
  // (empty: none). `resuming`: the agent resumes a session whose workers run
  // (a broken stream); a cordoned or quarantined node keeps running what it
  // runs, only new joins are refused.
  // Possible errors: INVALID_ARGUMENT (a check's name empty or too long, too
  // many checks, an id too long), FAILED_PRECONDITION (a check failed: its
  // name and output; the node is CORDONED or QUARANTINED: why, and how to let
  // it in again), RESOURCE_EXHAUSTED (max_nodes recorded).
  absl::Status Admit(const std::string& node_id, const std::string& address,
                     const std::string& job_id, const std::vector<v1::HealthCheckResult>& checks,
                     bool resuming);

  // A node already in `job_id` ran `checks` between generations (after a
  // restart stopped its workers of `generation`): the results are stored with
  // it, and each failed check is a counted incident, as at Admit. The node
  // leaves the job by itself (Leave); nothing is refused here.
  // Possible errors: INVALID_ARGUMENT (as Admit), RESOURCE_EXHAUSTED
  // (max_nodes recorded).
  absl::Status ReportChecks(const std::string& node_id, const std::string& job_id,
                            int64_t generation, const std::vector<v1::HealthCheckResult>& checks);

  // The jobs' durable events: kWorkerFailed (worker failures and hangs of a
  // worker: local_rank >= 0) and kNodeLost of a node the job lost (its failure
  // has a node_loss kind: lease expired, declared dead) become incidents;
  // other events are ignored.
  void RecordEvents(const std::vector<rendezvous::JobEvent>& events);

  // The operator's hand. Cordon records a node never seen. Possible errors:
  // INVALID_ARGUMENT (empty or too long id or reason), NOT_FOUND (Uncordon of
  // a node never seen), RESOURCE_EXHAUSTED (Cordon of one node too many).
  absl::StatusOr<v1::Node> Cordon(const std::string& node_id, const std::string& reason);
  absl::StatusOr<v1::Node> Uncordon(const std::string& node_id);

  // NOT_FOUND: never seen.
  absl::StatusOr<v1::Node> Get(const std::string& node_id) const;
  // By node id.
  std::vector<v1::Node> List() const;
  // Nodes per state (every state present, 0 when none): the metrics' gauge.
  std::map<v1::NodeState, int64_t> CountByState() const;

  // The commit-loop adapter: the records changed since the last call (and
  // clears the dirty set); MarkDirty gives back the ids of a failed batch.
  std::vector<v1::Node> TakeDirty();
  void MarkDirty(const std::vector<std::string>& node_ids);
  // The same for the policy: set since the last call (and clears the mark).
  std::optional<v1::QuarantinePolicy> TakeDirtyPolicy();
  void MarkPolicyDirty();

 private:
  // The node's record, created READY when new (nullptr: max_nodes reached).
  v1::Node* FindOrAddLocked(const std::string& node_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // INVALID_ARGUMENT: a node id empty or too long, too many checks, a check's
  // name empty or too long.
  absl::Status ValidateChecks(const std::string& node_id,
                              const std::vector<v1::HealthCheckResult>& checks) const;
  // Stores `checks` (replacing older results of the same name, output cut to
  // its tail) and adds an incident per failed one; returns why the first
  // failed ("" when all passed).
  std::string RecordChecksLocked(v1::Node& node, const std::string& job_id, int64_t generation,
                                 const std::vector<v1::HealthCheckResult>& checks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends `incident` (bounded), marks dirty, and applies the policy.
  void AddIncidentLocked(v1::Node& node, v1::NodeIncident incident)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker failure or hang: counted when it is the earliest of its
  // generation (moves the count from a later one).
  void AddWorkerIncidentLocked(const rendezvous::JobEvent& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // READY and at or past the policy: QUARANTINED with the incidents as reason.
  void ApplyPolicyLocked(v1::Node& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetStateLocked(v1::Node& node, v1::NodeState state, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkDirtyLocked(const std::string& node_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NotifyChange();
  // Drops earliest_ entries older than the policy window.
  void PruneEarliestLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock& clock_;
  const NodeLedgerOptions options_;
  mutable absl::Mutex mu_;
  QuarantinePolicy policy_ ABSL_GUARDED_BY(mu_);
  // When SetPolicy (or a stored one) set policy_; 0: options_.quarantine.
  int64_t policy_set_unix_ms_ ABSL_GUARDED_BY(mu_) = 0;
  bool policy_dirty_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, v1::Node> nodes_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> dirty_ ABSL_GUARDED_BY(mu_);
  // (job, generation) -> (node, time) of its counted worker incident.
  std::map<std::pair<std::string, int64_t>, std::pair<std::string, int64_t>> earliest_
      ABSL_GUARDED_BY(mu_);
};

// "ready", "cordoned", "quarantined": the metrics' state label and ddpctl's
// column.
const char* NodeStateName(v1::NodeState state);

}  // namespace ddp::fleet

#endif  // DDP_COORDINATOR_FLEET_NODE_LEDGER_H_
