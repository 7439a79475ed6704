#ifndef DDP_COORDINATOR_RENDEZVOUS_JOB_H_
#define DDP_COORDINATOR_RENDEZVOUS_JOB_H_

// One training job's rendezvous and lifecycle state machine. Plain C++: driven
// by inputs (registrations, heartbeats, worker exits, stop confirmations,
// master info, stream closes, leaves, scheduler operations, Tick), it appends
// the messages to send and the job events to an Outbox, and records what must
// be persisted (TakeChanges). All time comes from the injected Clock, all
// timeouts from JobSettings.
//
// clang-format off
//
//              CreateJob / first Register
//                         |
//                         v
//     +-------------> WAITING ---- join timeout ----------------> FAILED
//     |                   |  closes: max nodes at once; min nodes
//     |                   |  after the last call (at once when
//     |                   |  reopened after a restart with >= min)
//     |  member lost      v
//     +-------------- STARTING   rank table fixed; RequestMasterInfo
//     |                   |      to group rank 0
//     |                   |  MasterInfo -> Assignment to every member
//     |                   v
//     |               RUNNING ---- all workers exited 0 ----> SUCCEEDED
//     |                   |
//     |                   |  worker failure, agent restarted, member
//     |                   |  lost / left / excluded, arrival below
//     |                   |  max, UpdateJob
//     |                   v
//     +-------------- RESTARTING stop barrier: every member confirmed
//       all stopped              WorkersStopped or was declared dead
//       or declared dead         after the shutdown timeout
//                         |
//                         +--- all stopped, after a worker failure that
//                              found the budget spent ----------> FAILED
//
// clang-format on
//
//   Any non-terminal state --CancelJob--> CANCELLED. Terminal: SUCCEEDED,
//   FAILED, CANCELLED (every node gets JobFinished).
//
// Membership: every registered node is a candidate of the next rendezvous. At
// close, at most max_nodes become members (previous members first, then join
// order); the rest are hot spares that fill the next generation after a member
// leaves. Losing a member (no heartbeat for heartbeat_timeout, Leave,
// ExcludeNode, declared dead) restarts without it; when fewer than min_nodes
// remain the reopened rendezvous waits for nodes up to the join timeout. A node
// that arrives while RUNNING below max_nodes triggers a restart that includes
// it. Leases (session.proto): a member removed while its workers may still run
// holds the next generation back until heartbeat_timeout after its last
// heartbeat, when its agent's lease has frozen them (StopBarrier::FenceUntil).
//
// Restarts: whether a disturbance of the running generation restarts it (and
// whether that spends max_restarts), stops it to fail, or is only recorded is
// RestartPolicy's decision (restart_policy.h states the rules: budget,
// knock-on, root cause, hang review); Job applies it.
//
// Registration, fencing and liveness: Membership (membership.h) keeps the
// registered nodes and says who may act (Fence), who is alive, who is lost and
// in what order nodes joined. Job adds the rules that need the state machine:
// WorkerExited, WorkersStopped and MasterInfo must name the current generation
// and Heartbeat any generation up to it; a newcomer that would replace a live
// agent is refused with ALREADY_EXISTS; a new incarnation of a member whose
// workers ran is a disruption for RestartPolicy; a resume re-sends what the
// node is waiting for.
//
// Thread-safety: not thread-safe; JobRegistry serializes all calls.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/rendezvous/idle_hang.h"
#include "coordinator/rendezvous/job_settings.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/rendezvous/job_time.h"
#include "coordinator/rendezvous/job_types.h"
#include "coordinator/rendezvous/membership.h"
#include "coordinator/rendezvous/rendezvous_round.h"
#include "coordinator/rendezvous/restart_policy.h"
#include "coordinator/rendezvous/stop_barrier.h"

namespace ddp::rendezvous {

// A job as the API shows it (ddp.v1.Job), built by the core itself: every
// field of `record` (a past run: its root cause and failures; no nodes, no
// events). Job::Status adds what a live job has besides its record.
v1::Job ApiJobOf(const JobRecord& record);

class Job {
 public:
  // A new job in WAITING; appends JOB_CREATED. `settings` must be valid.
  Job(std::string job_id, const JobSettings& settings, const RendezvousLimits& limits,
      const Clock& clock, Outbox* outbox);
  // Rebuilds a job from storage. Nodes start disconnected with a fresh
  // heartbeat deadline: those that resume (Register, same incarnation) within
  // heartbeat_timeout keep their generation; the others are lost. The stored
  // events are retained again (EventsSince answers as before the restart).
  static absl::StatusOr<std::unique_ptr<Job>> Restore(const JobSnapshot& snapshot,
                                                      const RendezvousLimits& limits,
                                                      const Clock& clock, Outbox* outbox);

  // Where messages and events go from now on (the registry's outbox).
  void set_outbox(Outbox* outbox) { outbox_ = outbox; }
  // A new job that is the next run of a finished job id (before its first
  // TakeChanges).
  void set_run(int run) { record_.set_run(run); }
  int run() const { return record_.run(); }
  // The job's bearer token's hash (stored; coordinator/auth checks it).
  const std::string& token_hash() const { return record_.token_hash(); }
  void SetTokenHash(const std::string& token_hash) {
    record_.set_token_hash(token_hash);
    MarkJobDirty();
  }
  // Everything stored about the job now (the record a new run archives).
  JobRecord Record() const { return MakeRecord(); }

  const std::string& id() const { return record_.job_id(); }
  JobState state() const { return JobStateOf(record_); }
  Generation generation() const { return round_.generation(); }
  int restart_count() const { return restart_policy_.restart_count(); }
  const JobSettings& settings() const { return record_.settings(); }
  int registered_nodes() const { return membership_.size(); }
  // True when `node_id` is registered with `incarnation` (a resume, not a new
  // agent).
  bool HasIncarnation(const std::string& node_id, Incarnation incarnation) const {
    const Node* node = membership_.Find(node_id);
    return node != nullptr && node->record.incarnation() == incarnation;
  }
  bool HasNode(const std::string& node_id) const { return membership_.Find(node_id) != nullptr; }
  // The job as the API shows it (ddp.v1.Job): its record (ApiJobOf), its
  // node counts and oldest kept event; with `include_nodes` its members and
  // spares (member_listing.h, ages at the clock's now) and where its time
  // went (job_time.h).
  v1::Job Status(bool include_nodes) const;
  // Events with index > after_index still retained, oldest first, at most
  // `limit`. Possible errors: OUT_OF_RANGE when events after `after_index` were
  // dropped.
  absl::StatusOr<std::vector<JobEvent>> EventsSince(int64_t after_index, int limit) const;

  // ---- Agent inputs ----
  // request.settings, when present, must be valid (JobRegistry::Register
  // checks them, and the job id, before any job sees the request).
  // Possible errors: INVALID_ARGUMENT (bad node id, incarnation 0, nproc or
  // requested rank out of range, address or role too long),
  // FAILED_PRECONDITION (settings contradict the job's; node excluded; job
  // finished and node unknown; same incarnation with a different nproc),
  // RESOURCE_EXHAUSTED (max_nodes plus the spare limit already registered).
  absl::StatusOr<RegisterResult> Register(const RegisterRequest& request);
  // Returns the generation whose workers the node may run and act in (the
  // lease's HeartbeatAck.running_generation): the current one while RUNNING
  // and the node is a member, else 0.
  // Possible errors: ABORTED (fenced), FAILED_PRECONDITION (excluded).
  absl::StatusOr<Generation> Heartbeat(const NodeRef& ref);
  // The node's workers' latest progress reports (those that made one), in
  // place of the earlier ones; kept in memory, shown by Status. A report of
  // the running generation with a checkpoint makes it the generation's last
  // checkpoint when newer (a time after now counts as now); the event that
  // ends the generation carries it (job_time.h). Possible errors: Heartbeat's.
  absl::Status ReportProgress(const NodeRef& ref, std::vector<WorkerProgress> progress);
  // The node's workers' idleness from a heartbeat that carried its worker
  // states (the full list; idle_hang.h). Counts only for a member of the
  // running generation that names it; otherwise ignored. Possible errors:
  // Heartbeat's.
  absl::Status ReportActivity(const NodeRef& ref, std::vector<WorkerActivity> workers);
  // The session's stream broke; the node has heartbeat_timeout to resume.
  absl::Status StreamClosed(const NodeRef& ref);
  // The agent leaves for good (it is removed at once). The last agent to
  // leave a job still waiting for its first generation ends it (CANCELLED,
  // "abandoned"), so a rerun of the id with other settings starts a new run.
  absl::Status Leave(const NodeRef& ref);

  // ---- Generation inputs ----
  // A worker's exit or hang. Only the first report per worker and generation
  // counts (repeats after a resume are ignored). Reports that arrive while
  // the generation is being stopped go into the failure history and, when the
  // job is about to fail, compete for the root cause.
  // Possible errors: ABORTED (fenced or stale generation), INVALID_ARGUMENT
  // (local rank outside the node's process count), FAILED_PRECONDITION (no
  // workers of this generation run yet).
  absl::Status WorkerExited(const NodeRef& ref, const WorkerExit& exit);
  // Possible errors: ABORTED, FAILED_PRECONDITION (no stop was requested).
  absl::Status WorkersStopped(const NodeRef& ref);
  // Possible errors: ABORTED, FAILED_PRECONDITION (node is not group rank 0 or
  // no master info is awaited), INVALID_ARGUMENT (port, id length, address).
  absl::Status ReportMasterInfo(const NodeRef& ref, const MasterInfo& info);

  // ---- Scheduler operations ----
  // Changes min/max nodes; restarts when the membership must change.
  // Possible errors: INVALID_ARGUMENT, FAILED_PRECONDITION (job finished).
  absl::Status Update(int min_nodes, int max_nodes);
  // Possible errors: FAILED_PRECONDITION (job finished).
  absl::Status Cancel(const std::string& reason);
  // The node is dismissed and may not rejoin; a restart follows if it was a
  // member. Possible errors: INVALID_ARGUMENT, FAILED_PRECONDITION (job
  // finished), RESOURCE_EXHAUSTED (exclusion list full).
  absl::Status ExcludeNode(const std::string& node_id, const std::string& reason);

  // ---- Drain and preemption ----
  // The node leaves at `leaves_at` at the latest (a scheduler's DrainNode, the
  // straggler policy, or its agent's preemption). A member of the running
  // generation stays until every member's workers said they are ready
  // (ReadyToLeave) or `leaves_at`, whichever comes first: meanwhile every
  // member gets a DrainNotice for its workers. Any other node (spare,
  // waiting, in a stopping generation) leaves at once. It leaves with
  // NodeDismissed{drained}; the generation restarts without it as a
  // membership change (RestartCause::DRAIN): a hot spare fills its place, or
  // the job goes on smaller within min_nodes; no budget is spent, no failure
  // recorded. A second drain of a draining node keeps the earlier deadline.
  // Possible errors: INVALID_ARGUMENT (node id), NOT_FOUND (not registered),
  // FAILED_PRECONDITION (job finished).
  absl::Status DrainNode(const std::string& node_id, absl::Time leaves_at,
                         const std::string& reason);
  // The agent's own notice (SIGTERM with --preemption-grace, the cloud's
  // notice file): DrainNode of its node. Possible errors: Heartbeat's and
  // DrainNode's.
  absl::Status Preempted(const NodeRef& ref, absl::Time leaves_at, const std::string& reason);
  // Every local worker of ref.generation said it is ready to leave (after
  // a DrainNotice); one of an older generation is ignored. Possible errors:
  // ABORTED (fenced).
  absl::Status ReadyToLeave(const NodeRef& ref);

  // Fires due timeouts (heartbeats, last call, join, master info, stop
  // barrier, drain deadlines, the straggler policy, a job-wide idle hang). Amortized O(1) when
  // nothing is due.
  void Tick();
  // The coordinator served nothing for `gap` until now (it stalled): as
  // after a restart, every node gets a full heartbeat_timeout from now, and
  // the other timers (last call, join, master info, stop barrier) move `gap`
  // later. Only ever delays a decision; fences stay.
  void ServingResumed(absl::Duration gap);

  // Persistence delta since the last call (empty when nothing changed).
  JobChanges TakeChanges();
  bool HasChanges() const {
    return job_dirty_ || counters_dirty_ || membership_.HasChanges() || events_dropped_ ||
           events_taken_index_ < last_event_index_;
  }

 private:
  // The job as `record` describes it (Restore adds the nodes, the new-job
  // constructor the first event and the rendezvous).
  Job(const JobRecord& record, const RendezvousLimits& limits, const Clock& clock, Outbox* outbox);
  // Retains the stored events again (Restore). Possible errors: DATA_LOSS.
  absl::Status RestoreEvents(const std::vector<JobEvent>& stored);
  using Node = Membership::Node;

  // Events, messages, persistence.
  void Emit(JobEventType type, const std::string& node_id, const std::string& message,
            std::optional<FailureInfo> failure = std::nullopt);
  // Emit in two steps, for an event with more fields set: one dated now, of
  // this generation; then numbered, retained and queued for delivery.
  JobEvent NewEvent(JobEventType type, const std::string& node_id, const std::string& message,
                    std::optional<FailureInfo> failure = std::nullopt) const;
  void Publish(JobEvent event);
  void Send(const Node& node, MessageBody body);
  void MarkJobDirty() { job_dirty_ = true; }
  JobRecord MakeRecord() const;
  bool IsMember(const Node& node) const;
  // Workers of the current generation's members still registered.
  int64_t MemberProcesses() const;

  // Agent inputs.
  // Tells every registered node that a node was refused (settings conflict).
  void NoticeConflict(const absl::Status& refusal);
  absl::StatusOr<RegisterResult> Resume(Node& node, const RegisterRequest& request);
  void ReplaceIncarnation(Node& node, const RegisterRequest& request);
  void AddNode(const RegisterRequest& request, int nproc);
  // Removes a node for good (lost, left, excluded, declared dead). `node_id`
  // is a copy: callers pass ids held in the round's by_rank, which this clears.
  // `cause`: why the generation restarts if the node was a running member.
  // `workers_stopped`: the agent stopped its workers itself (Leave); otherwise
  // a member whose workers may still run fences the next generation until its
  // lease has run out (FenceWorkersOf). `loss`: set when the coordinator lost
  // the node (its lease expired, declared dead): the kNodeLost event then
  // carries a node failure with that kind (jobs.proto Failure.node_loss).
  void RemoveNode(std::string node_id, const std::string& reason,
                  RestartCause cause = RestartCause::NODE_LOSS, bool workers_stopped = false,
                  FailureInfo::NodeLoss loss = FailureInfo::NODE_LOSS_UNSPECIFIED);
  // A member that leaves the generation while its workers may still run (cut
  // off, excluded, declared dead, replaced): no next generation starts before
  // its agent's lease has run out, heartbeat_timeout after its last heartbeat.
  void FenceWorkersOf(const Node& node);
  // A resume that reports its lease ran out (RegisterRequest::lease_expired).
  void HandleLeaseExpired(Node& node, const RegisterRequest& request);
  void ResendPending(const Node& node);

  // The generation and restarts.
  void OpenRendezvous(bool after_restart);
  void MaybeCloseRendezvous();
  void CloseRendezvous();
  // Group rank 0 answered: the generation runs; every member gets its
  // assignment.
  void PushAssignments(MasterInfo master);
  // Carries out what the restart policy decided: announces the failures it
  // recorded (WORKER_FAILED), then restarts (RESTARTING, StopAllWorkers) or
  // stops every worker for the policy to conclude (hang review, failing).
  void Apply(const RestartDecision& decision);
  // RestartPolicy::Decide with this job as the context.
  void Decide(const Disruption& disruption, std::optional<LostPeer> lost_peer = std::nullopt);
  // The RESTARTING event, dated `began` (a hang's restart is named once the
  // stop barrier completed, but began at the report).
  void EmitRestarting(RestartCause cause, const std::string& reason, absl::Time began);
  // The generation's last checkpoint onto the event that ends it.
  void StampCheckpoint(JobEvent& event) const;
  // RESTARTING: StopWorkers to every member; the barrier ends in
  // MaybeFinishStopBarrier.
  // take_stacks: a declared hang; each agent sends its workers' stacks
  // before it stops them (session.proto StopWorkers).
  void StopAllWorkers(const std::string& reason, bool take_stacks = false);
  void MaybeFinishStopBarrier();
  // A member other than `reporter` whose stream closed (or that went silent)
  // while its workers of this generation ran (earliest first), if any.
  std::optional<LostPeer> LostPeerOf(const std::string& reporter) const;
  void Finish(JobState state, std::optional<FailureInfo> root_cause, const std::string& message);

  // Timeouts.
  // Removes the nodes silent for heartbeat_timeout (Membership::Silent).
  void RemoveSilentNodes(absl::Time now);

  // Drains. Dismisses (drained) and removes the draining nodes that may go
  // now: every one when all members are ready, those past their deadline,
  // and those that run no workers of a running generation.
  void ReleaseDrainingNodes();
  // Every member of the running generation that has not succeeded said its
  // workers are ready (ReadyToLeave of this generation).
  bool AllMembersReadyToLeave() const;
  // The straggler exclusion policy (JobSettings::straggler_exclude_factor),
  // at most once per heartbeat_interval: drains and excludes a member
  // slower than the factor for straggler_exclude_after.
  void ExcludeLastingStragglers(absl::Time now);
  // The job-wide idle hang (idle_hang.h), at most once per
  // heartbeat_interval while RUNNING with two members or more (a generation
  // of one node: its agent decides, with its workers' evidence): declared
  // as a hang of the worker idle first, through RestartPolicy as an agent's
  // hang report is (stacks taken, budget, root cause).
  void DeclareIdleHang(absl::Time now);

  // The job's own part of its record, the stored message itself: its id,
  // settings, state, creation and finish times (absl::Time() unknown or not
  // yet), run, token hash and finish message. Its objects keep their parts
  // (RestartPolicy: the budget, root cause and failures; Membership: the
  // exclusions and join order; RendezvousRound: the generation, master and
  // world size; the event counter below) and MakeRecord writes them in.
  JobRecord record_;
  RendezvousLimits limits_;
  const Clock* clock_;
  Outbox* outbox_;

  // Restart budget, root cause, failure history, hang review.
  RestartPolicy restart_policy_;

  // Registered nodes, liveness, join order, exclusions, fencing.
  Membership membership_;
  // The generation, its members, master info and the round's deadlines.
  RendezvousRound round_;
  // When the running generation's assignments went out (absl::Time() until
  // one did in this process: not stored).
  absl::Time running_since_;

  // Timers of the current state.
  // RESTARTING: the members whose workers must be confirmed stopped, and the
  // fence of members that left while theirs could still run (not stored:
  // Restore sets it conservatively).
  StopBarrier stop_barrier_;
  absl::Time next_conflict_notice_ = absl::InfinitePast();

  // Draining nodes (DrainNode): when each leaves at the latest, and why.
  // Stored with the node's record (SetDrain, DrainLeavesAt): Restore
  // rebuilds it, so a drain under way survives a coordinator restart and the
  // node still leaves at its time, as a drain (no restart budget spent).
  struct Drain {
    absl::Time leaves_at;
    std::string reason;
  };
  std::map<std::string, Drain> draining_;
  absl::Time next_straggler_check_ = absl::InfinitePast();
  absl::Time next_idle_check_ = absl::InfinitePast();

  // The running generation's newest checkpoint its workers reported (in
  // memory: after a coordinator restart, back with the next report), and
  // the job's time account (JobTimeLedger), fed by every event Publish
  // appends and by the retained ones at Restore.
  std::optional<absl::Time> generation_checkpoint_;
  int64_t generation_checkpoint_step_ = 0;
  JobTimeLedger time_ledger_;

  // Events (bounded) and persistence delta: the events after
  // events_taken_index_ go into the next TakeChanges; events_dropped_: older
  // ones left events_ since (the store drops them too).
  std::deque<JobEvent> events_;
  int64_t last_event_index_ = 0;
  int64_t events_taken_index_ = 0;
  bool events_dropped_ = false;
  bool job_dirty_ = true;
  bool counters_dirty_ = true;
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_JOB_H_
