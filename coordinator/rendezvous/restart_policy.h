#ifndef DDP_COORDINATOR_RENDEZVOUS_RESTART_POLICY_H_
#define DDP_COORDINATOR_RENDEZVOUS_RESTART_POLICY_H_

// What a job does when its running generation is disturbed: restart (charging
// the restart budget or not), stop every worker and then fail, or only record
// the failure. The one place that decides (Decide); Job applies the decision
// (the RESTARTING event, the stop barrier, the end of the job).
//
// Rules:
// - Budget: only worker failures (and an agent re-registering with a new
//   incarnation while its workers ran and its old session was still open)
//   spend max_restarts; membership changes (a member lost, left, excluded or
//   declared dead, a node joining below max_nodes, a resize) do not.
// - Knock-on: a member whose session stream closes (the agent died, or the
//   network cut it off) is known at once. A worker failure reported by another
//   member while that member is lost is a knock-on of the loss (peers fail on
//   the broken collective a moment after a node dies): the restart names the
//   lost node and is free, and so is a new incarnation that replaces an agent
//   whose stream had closed.
// - Root cause: when a failure finds the budget spent, every worker of the
//   generation is stopped first (the stop barrier, no RESTARTING event), so
//   that the reports of the other failures of that generation arrive; then the
//   job fails with the earliest of them by failure time (FailedEarlier) as its
//   root cause, as torchrun picks it. The first report is often not the first
//   failure: the peers of a dead worker fail on the broken collective a moment
//   later, and their reports race its own. While that barrier runs, root_cause
//   holds the earliest failure so far (it is persisted, so a restored job in
//   RESTARTING with a root cause finishes the barrier and fails).
// - Hang review: a hang reported with budget left charges the budget and stops
//   every worker first; the restart names the worst failure of the generation
//   (FailedEarlier: a stopped process first) once the barrier completes, dated
//   from the report. The review is not stored: a job restored meanwhile
//   finishes the barrier without the event (the restart is counted already).
// - Crash loop: a worker failure reported within crash_loop_window of its
//   generation's start, the same (exit code, signal, message) as the first
//   failure of each of the crash_loop_generations - 1 generations before it,
//   each also that early, would fail the next generation too: the job stops
//   every worker and fails with it at once instead of cycling through the rest
//   of the budget. Not stored: after a coordinator restart the count starts
//   over (it only delays the early stop).
// - History: every failure goes into a bounded history ordered by failure time
//   (the newest max_retained_failures kept), not by arrival.
//
// Thread-safety: not thread-safe; Job owns one and calls it under the
// registry's lock.

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/rendezvous/job_types.h"

namespace ddp::rendezvous {

// A member of the running generation that the coordinator has lost touch
// with (Job::LostSince): its stream closed, or it went silent.
struct LostPeer {
  std::string node_id;
  absl::Time since;            // when it was lost
  bool stream_closed = false;  // else silent for `silent_for`
  absl::Duration silent_for;   // since its last heartbeat
};

// What disturbed the generation.
struct Disruption {
  enum class Kind {
    // A worker exited non-zero, was killed or hung (`failure`).
    kWorkerFailure,
    // The agent of a member whose workers ran came back as a new incarnation.
    kAgentReplaced,
    // A member was lost, left, excluded or declared dead, a node joined below
    // max_nodes, the job was resized (`cause`, `reason`).
    kMembershipChange,
  };
  Kind kind = Kind::kWorkerFailure;
  FailureInfo failure;  // kWorkerFailure
  // kAgentReplaced: the node, its incarnations, and whether the old agent's
  // stream had closed (it died or was cut off) before the new one registered.
  std::string node_id;
  Incarnation old_incarnation = 0;
  Incarnation new_incarnation = 0;
  bool old_session_lost = false;
  // kMembershipChange.
  RestartCause cause = RestartCause::RESTART_CAUSE_UNSPECIFIED;
  std::string reason;

  static Disruption WorkerFailure(FailureInfo failure);
  static Disruption AgentReplaced(std::string node_id, Incarnation old_incarnation,
                                  Incarnation new_incarnation, bool old_session_lost);
  static Disruption MembershipChange(RestartCause cause, std::string reason);
};

// The job as the decision sees it.
struct RestartContext {
  JobState state = JobState::kRunning;
  Generation generation = 0;
  absl::Time now;
  // When the current generation's workers were told to start (its
  // assignments); absl::Time(): not known (a job restored from storage).
  absl::Time running_since;
  // A worker failure while RUNNING: the member other than the reporter that
  // was lost earliest, if any (the failure is then its knock-on).
  std::optional<LostPeer> lost_peer;
};

struct RestartDecision {
  enum class Action {
    // Nothing to stop: the generation is not running (a report of one being
    // torn down only enters the history and the root-cause race).
    kIgnore,
    // Emit RESTARTING (cause, reason), stop every worker, form again.
    kRestart,
    // Stop every worker without an event; ConcludeStop names the restart.
    kReviewHang,
    // Stop every worker without an event; ConcludeStop fails the job.
    kStopThenFail,
  };
  Action action = Action::kIgnore;
  RestartCause cause = RestartCause::RESTART_CAUSE_UNSPECIFIED;  // kRestart
  bool charged = false;                                          // the budget was spent on it
  std::string reason;                                            // RESTARTING event, StopWorkers
  // Failures the history gained, in order: Job announces each (kWorkerFailed).
  std::vector<FailureInfo> recorded;
};

// What a completed stop barrier ends in.
struct StopOutcome {
  // The hang review's restart, named now and dated from when it began.
  struct NamedRestart {
    RestartCause cause = RestartCause::RESTART_CAUSE_UNSPECIFIED;
    std::string reason;
    absl::Time began;
  };
  std::optional<NamedRestart> named_restart;
  // Set: the job fails with this root cause and message. Unset: the next
  // rendezvous opens.
  std::optional<FailureInfo> fail_with;
  std::string fail_message;
};

class RestartPolicy {
 public:
  struct Options {
    int max_restarts = 3;            // JobSettings::max_restarts
    int max_retained_failures = 64;  // RendezvousLimits
    int max_message_length = 4096;   // RendezvousLimits
    int max_failures_with_logs = 8;  // RendezvousLimits
    // Crash loop (see the rules above): this many generations in a row, each
    // failing the same way within `crash_loop_window` of its start. 0: off.
    int crash_loop_generations = 3;
    absl::Duration crash_loop_window = absl::Seconds(10);
  };
  // As stored (JobRecord): restarts spent, root cause, failure history.
  RestartPolicy(const Options& options, int restart_count, std::optional<FailureInfo> root_cause,
                std::vector<FailureInfo> failures);

  // The one decision: restart (charged or free, with its cause), stop and
  // then fail, or ignore. Charges the budget, records failures and updates the
  // root cause as the rules above say.
  RestartDecision Decide(const Disruption& disruption, const RestartContext& context);
  // The stop barrier of a RESTARTING job completed. Takes the hang review (its
  // restart is named once).
  StopOutcome ConcludeStop();
  // The job finished (any terminal state) with `root_cause`.
  void Finish(std::optional<FailureInfo> root_cause);

  int restart_count() const { return restart_count_; }
  int max_restarts() const { return options_.max_restarts; }
  // FAILED: the root cause. RESTARTING: set while stopping to fail.
  const std::optional<FailureInfo>& root_cause() const { return root_cause_; }
  // By FailedEarlier, bounded.
  const std::vector<FailureInfo>& failures() const { return failures_; }

  // "worker 1 (rank 3) on node 'b' failed: exit code 1".
  static std::string FailureSentence(const FailureInfo& failure);

 private:
  RestartDecision DecideWorkerFailure(const FailureInfo& failure, const RestartContext& context);
  RestartDecision DecideKnockOn(const FailureInfo& failure, const LostPeer& lost,
                                const RestartContext& context);
  // Budget left: a charged restart (a hang: reviewed first); spent: stop to fail.
  RestartDecision Charge(const FailureInfo& failure, absl::Time now, RestartDecision decision);
  // Counts an early failure of a new generation; true when it completes a
  // crash loop.
  bool CrashLoop(const FailureInfo& failure, const RestartContext& context);
  void Record(const FailureInfo& failure, RestartDecision& decision);

  Options options_;
  int restart_count_ = 0;
  std::optional<FailureInfo> root_cause_;
  std::vector<FailureInfo> failures_;

  struct HangReview {
    FailureInfo culprit;  // the worst failure of the generation so far
    absl::Time began;
  };
  std::optional<HangReview> hang_review_;

  // The crash-loop count: the signature of the early failures of consecutive
  // generations, the last such generation, how many in a row.
  std::string early_signature_;
  Generation early_generation_ = 0;
  int early_in_a_row_ = 0;
  // Set when a crash loop stops the job: the message it fails with.
  std::optional<std::string> crash_loop_message_;
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_RESTART_POLICY_H_
