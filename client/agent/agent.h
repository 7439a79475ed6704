#ifndef DDP_CLIENT_AGENT_AGENT_H_
#define DDP_CLIENT_AGENT_AGENT_H_

// The node agent's core: reacts to the coordinator's orders and to its
// workers, one event at a time, on the thread that calls Run(). Plain C++ (no
// gRPC): it talks through CoordinatorLink and hears through SessionEvents
// (session_link.h), so tests drive it with a fake link and real workers.
//
//   event                          action
//   Registered (reconnected)       resumed: re-report this generation's
//                                  exits; not resumed: the coordinator forgot
//                                  this node, stop its workers
//   RequestMasterInfo(g)           MasterInfo{g, free port, NCCL id (empty
//                                  without NCCL)}; the same answer if asked
//                                  again for g
//   Assignment(g)                  g == running generation: nothing (a resend)
//                                  g newer: stop any older workers, start
//                                  nproc workers with BuildWorkerEnv
//   StopWorkers(g)                 stop (SIGTERM, SIGKILL after the shutdown
//                                  timeout), run the --health-check list
//                                  again, then WorkersStopped{g}; a check
//                                  failed: Leave{g, results}, exit
//                                  kExitJobFailed
//   JobFinished                    stop; print the root-cause summary unless
//                                  SUCCEEDED; exit kExitSucceeded or
//                                  kExitJobFailed
//   NodeDismissed                  stop; exit kExitJobFailed (drained: 128 + the
//                                  signal that began it, else kExitDrained)
//   DrainNotice(g)                 g running: the preemption notice file for
//                                  the workers (client/preemption_notice.h);
//                                  once every local worker's ready file
//                                  exists, ReadyToLeave{g}
//   RequestStacks                  Stacks: every running worker's Python
//                                  stack (client/stack_dump.h), at once
//   worker exit / hang (gen g)     WorkerExited{g} at once (zero exits too: the
//                                  coordinator counts successes), one per
//                                  worker and generation, time = when it
//                                  failed (FailureTime); not for knock-on
//                                  hangs, nor for exits a stop caused;
//                                  the first hang of a generation: every
//                                  local worker's stack first (logged, grouped
//                                  by stack; the hung rank's own stack goes
//                                  with its WorkerExited)
//   StopWorkers(g), with           --in-process-restart: survivors (workers
//     --in-process-restart         under ddp_coordinator.run, running g) are
//                                  told to abandon g (recovery_channel.h);
//                                  those that park within the timeout stay,
//                                  the others are stopped; WorkersStopped{g}
//                                  (no health checks: survivors keep running)
//   Assignment(g'), survivors      survivors get g''s variables and join it;
//     parked                       the other slots start a worker (a standby
//                                  with --prewarm); same local world size
//                                  only, else every worker starts again
//   StopWorkers(g) (continued)     before WorkersStopped: WorkerExited for
//                                  failures seen during the stop that the
//                                  stop did not cause
//   fenced (ABORTED)               stop; generation 0 (the session registers a
//                                  new incarnation)
//   session failed                 stop; exit kExitCoordinatorError
//   RequestShutdown(signal N)      stop; Leave; exit 128 + N. The first
//                                  SIGTERM with --preemption-grace D while
//                                  workers run: the notice file, Preempted{now
//                                  + D}; the workers go on until NodeDismissed
//                                  or D (then stop; Leave; exit 128 + N)
//   --preemption-notice-file       polled: when it appears, as SIGTERM with
//                                  the grace it states (its seconds, else
//                                  --preemption-grace, else 30 s), exit
//                                  kExitDrained
//   lease ran out (worker_lease.h) the lease thread freezes the workers
//                                  (SIGSTOP) and the session resumes at once
//                                  saying so; a renewal that names their
//                                  generation thaws them (SIGCONT); any stop
//                                  of frozen workers (StopWorkers, a newer
//                                  Assignment, not resumed, fenced, JobFinished,
//                                  a signal) kills them with SIGKILL
//
// Every worker is reaped before Run returns (no orphan, no zombie).
//
// Thread-safety: the SessionEvents methods and RequestShutdown may be called
// from any thread (they queue an event); Run from one thread, once.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/agent/session_link.h"
#include "client/agent/worker_lease.h"
#include "client/launch_options.h"
#include "client/prewarm/standby_pool.h"
#include "client/progress_reader.h"
#include "client/recovery_channel.h"
#include "client/root_cause.h"
#include "client/stack_dump.h"
#include "client/worker_env.h"
#include "client/worker_supervisor.h"
#include "common/clock.h"

namespace ddp::client {

inline constexpr int kExitSucceeded = 0;
inline constexpr int kExitJobFailed = 1;         // failed, cancelled, dismissed
inline constexpr int kExitCoordinatorError = 2;  // unreachable or refused
// The entry point cannot start (client/entry_point_check.h): found before joining.
inline constexpr int kExitEntryPointError = 2;
// The job succeeded without this node: it waited as a hot spare and never ran
// a worker (not a success of its own: a scheduler must not count it as one).
inline constexpr int kExitSpareUnused = 3;
inline constexpr int kExitSignalBase = 128;  // + signal number
// The node left as asked: drained (ddpctl nodes drain, the straggler policy) or
// preempted by the cloud's notice file.
inline constexpr int kExitDrained = 4;
// The grace of a cloud notice file that states none, without --preemption-grace.
inline constexpr absl::Duration kDefaultCloudNoticeGrace = absl::Seconds(30);

struct AgentOptions {
  LaunchOptions launch;  // entry point, flags (job id, role, redirects, ...)
  std::string run_dir;   // MakeRunDirectory(); worker files go below it
  EnvMap base_env;       // usually CurrentEnvironment()
  WorkerSupervisor::Options supervisor;
  // How the workers' progress reports are read for the heartbeats.
  ProgressReader::Options progress;
  // MASTER_ADDR this node offers as group rank 0; empty: its registered
  // address.
  std::string master_addr;
  // Injected for tests; null: PickFreePort() and GenerateNcclUniqueId().
  std::function<absl::StatusOr<int>()> pick_port;
  std::function<absl::StatusOr<std::string>()> make_nccl_id;
  // Where the failure summary goes; null: stderr.
  std::function<void(const std::string&)> print_summary;
  // The clock of the lease (worker_lease.h) and of the --prewarm standby
  // pool's delays; null: MonotonicClock (the lease file states its deadline
  // on CLOCK_MONOTONIC). The lease file is run_dir/lease.json (none without a
  // run_dir).
  const Clock* monotonic_clock = nullptr;
};

class Agent : public SessionEvents {
 public:
  // `link` must outlive the agent (set_link for two-phase wiring).
  Agent(AgentOptions options, const Clock& clock, CoordinatorLink* link);
  ~Agent() override;  // stops any workers
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  void set_link(CoordinatorLink* link) { link_ = link; }

  // Processes events until the job ends for this node; returns the exit code.
  int Run();
  // SIGINT/SIGTERM: stop the workers, Leave, exit 128 + signal.
  void RequestShutdown(int signal);

  // SessionEvents.
  void OnRegistered(const v1::Registered& registered, bool reconnected) override;
  void OnCoordinatorMessage(const v1::CoordinatorMessage& message) override;
  void OnFenced(const absl::Status& status) override;
  void OnSessionFailed(const absl::Status& status) override;
  std::vector<v1::WorkerState> WorkerStates() override;
  void OnLeaseGranted(absl::Duration lease) override;
  void OnLeaseRenewed(absl::Time sent_at, int64_t running_generation) override;

 private:
  struct RegisteredEvent {
    v1::Registered registered;
    bool reconnected;
  };
  struct ExitEvent {
    int64_t generation;
    WorkerExit exit;
  };
  struct FencedEvent {
    absl::Status status;
    absl::Notification* done;
  };
  struct SessionFailedEvent {
    absl::Status status;
  };
  struct SignalEvent {
    int signal;
  };
  using Event = std::variant<RegisteredEvent, v1::CoordinatorMessage, ExitEvent, FencedEvent,
                             SessionFailedEvent, SignalEvent>;

  // False (event dropped) once Run has returned.
  bool Post(Event event);
  void Handle(Event& event);
  void HandleRegistered(const RegisteredEvent& event);
  void HandleMessage(const v1::CoordinatorMessage& message);
  void HandleAssignment(const v1::Assignment& assignment);
  void HandleRequestMasterInfo(const v1::RequestMasterInfo& request);
  void HandleStopWorkers(const v1::StopWorkers& stop);
  // After a restart stopped this node's workers of `generation`: runs the
  // --health-check list again (none: true). A failure: Leave with every
  // result (the coordinator stores them with the node), exit kExitJobFailed,
  // false. The checks run before WorkersStopped, so the restart waits for
  // them as for a node slow to stop: at most the job's shutdown timeout.
  bool PassesHealthChecksBetweenGenerations(int64_t generation);
  void HandleJobFinished(const v1::JobFinished& finished);
  void HandleRequestStacks(const v1::RequestStacks& request);
  // The Python stacks of the current generation's running workers (none
  // without workers); takes up to StackDumpOptions::timeout.
  std::vector<StackDump> CollectLocalStacks();
  // The first hang of the generation: every local worker's stack, logged
  // grouped by stack; returns the stack of `hang`'s rank ("" without one).
  std::string LogStacksAtHang(const WorkerExit& hang);
  // StopWorkers{take_stacks} (a hang declared on any node): sends this node's
  // workers' stacks (Stacks with request_id 0) before they are stopped, those
  // taken at this node's own hang if there was one.
  void SendStacksAtHang();
  // Takes (once per generation) and logs, grouped, every local worker's
  // stack into hang_stacks_; `when` ends the log line's first sentence.
  void TakeStacksAtHang(const std::string& when);
  // Writes the sitecustomize.py of every Python worker (stack dumps,
  // client/prewarm/sitecustomize.py) into run_dir/site; sets
  // worker_site_dir_ (left empty, with a warning, when it cannot).
  void PrepareWorkerSite();
  void HandleExit(const ExitEvent& event);
  // Keeps the first event of each worker of the generation and reports it
  // (unless it is a knock-on hang).
  void RecordExit(const WorkerExit& exit);
  // An interactive run's worker ended by the terminal's Ctrl-C (SIGINT, or
  // exit code 130 from a script that caught KeyboardInterrupt).
  bool IsCtrlCOnTerminal(const WorkerExit& exit) const;
  // `stack`: the worker's Python stack when a hang was declared.
  void ReportExit(const WorkerExit& exit, const std::string& stack = "");
  void StartWorkers(const v1::Assignment& assignment);
  // The worker of `local_rank` for assignment `p`.
  WorkerSpec SpecFor(const v1::Assignment& p, int local_rank) const;
  // --prewarm: the standby pool, and a standby per local rank for the
  // environment the first assignment will most likely bring.
  void StartStandbys();
  // --in-process-restart, a StopWorkers of the running generation: asks the
  // survivors to abandon it, stops the other workers (reporting their own
  // failures as HandleStopWorkers does). False (nothing done) when no worker
  // parked: the caller stops every worker as without the flag.
  bool ParkSurvivors();
  // --in-process-restart, an Assignment while survivors are parked: they
  // join it, the other slots start a worker. False (nothing done) when the
  // assignment does not fit the slots.
  bool ResumeSurvivors(const v1::Assignment& assignment);
  // The recovery channel of `local_rank` (created on first use); null when
  // it cannot be made (logged).
  const RecoveryChannel* ChannelOf(int local_rank);
  // DDP_RECOVERY_DIR of `local_rank`: run_dir/recovery/<local_rank>.
  std::string RecoveryDirOf(int local_rank) const;
  // Stops and releases the current workers (if any); blocks until reaped.
  // Returns their final states (empty when there were none).
  // `first_signal`: see WorkerSupervisor::Stop.
  std::vector<WorkerState> StopWorkers(const std::string& why, int first_signal = SIGTERM);
  void Finish(int exit_code);

  // Drain and preemption.
  // How long Run waits for an event before PollPreemption: the monitor
  // interval while a notice file is watched, a notice is out or this node
  // leaves; otherwise forever.
  absl::Duration PreemptionPollInterval() const;
  // The cloud's notice file, this node's deadline, the workers' ready files.
  void PollPreemption();
  // This node leaves within `grace`: tells the workers and the coordinator.
  void BeginLeaving(absl::Duration grace, const std::string& reason, int signal);
  // Writes the workers' notice file for the running generation.
  void NoticeWorkers(const std::string& node_id, absl::Time leaves_at, const std::string& reason);
  // A new generation starts: no notice is out any more (one of this node's
  // own departure is given again).
  void ResetNotice();
  // The messages of a departure (sent again after a resume: both idempotent).
  void SendPreempted();
  void SendReadyToLeave();
  void HandleDrainNotice(const v1::DrainNotice& notice);
  void HandleNodeDismissed(const v1::NodeDismissed& dismissed);

  const AgentOptions options_;
  const Clock& clock_;
  // options_.monotonic_clock or MonotonicClock.
  const Clock& monotonic_clock_;
  bool ran_workers_ = false;  // set by the event thread once workers started
  CoordinatorLink* link_;

  absl::Mutex mu_;
  std::deque<Event> queue_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // Run returned

  // The current workers; read by WorkerStates() on the heartbeat thread.
  absl::Mutex supervisor_mu_;
  std::shared_ptr<WorkerSupervisor> supervisor_ ABSL_GUARDED_BY(supervisor_mu_);
  // Their progress files (reset with each generation's workers).
  ProgressReader progress_ ABSL_GUARDED_BY(supervisor_mu_);
  // Per local rank, the idle_ms sent for an idle worker and the idle start it
  // stood for: repeated unchanged while the worker stays idle, so that its
  // states do not change at every heartbeat (the coordinator keeps the date
  // of the first report). Cleared with each generation's workers.
  std::map<int, std::pair<absl::Time, int64_t>> idle_ms_sent_ ABSL_GUARDED_BY(supervisor_mu_);

  // Owned by the Run thread.
  int64_t generation_ = 0;  // of the running (or last) workers
  absl::Duration shutdown_timeout_;
  // The job's hang_timeout (Registered.settings), which wins over
  // --hang-timeout; unset until a coordinator that keeps it answered.
  std::optional<absl::Duration> job_hang_timeout_;
  // Of generation_: the first event of each worker (knock-on hangs included,
  // though never reported), kept until the next generation starts.
  std::vector<WorkerExit> exits_;
  std::optional<std::pair<int64_t, v1::MasterInfo>> master_answer_;
  std::optional<int> exit_code_;

  // Where the workers' sitecustomize.py is (first on a Python worker's
  // PYTHONPATH); empty: none.
  std::string worker_site_dir_;
  // Of generation_: the stacks taken at its first hang (knock-on hangs of
  // the same check reuse them); reset with exits_.
  std::optional<std::vector<StackDump>> hang_stacks_;

  // --in-process-restart: each local rank's channel, and the local ranks
  // whose workers left generation_ and wait for the next one (ParkSurvivors).
  std::map<int, RecoveryChannel> channels_;
  std::vector<int> parked_;
  // The generation the supervisor's workers run (their exits are posted with
  // it); changes without a new supervisor in an in-process restart.
  std::atomic<int64_t> supervised_generation_{0};
  // Drain and preemption (client/preemption_notice.h), owned by the Run
  // thread. notice_file_: RUN_DIR/preemption_notice.json (empty without a
  // run_dir: no notice for the workers).
  std::string notice_file_;
  int local_world_size_ = 0;  // of generation_'s workers
  // This node announced it leaves (SIGTERM with --preemption-grace, the
  // cloud's notice file): by when, and the signal that began it (0: none).
  std::optional<absl::Time> own_leave_at_;
  std::string own_leave_reason_;
  int leave_signal_ = 0;
  bool cloud_notice_seen_ = false;
  // The generation whose workers got a notice (0: none), and whether their
  // readiness went to the coordinator.
  int64_t notice_generation_ = 0;
  bool ready_reported_ = false;

  // --prewarm; null without. Reset in the destructor after the workers stop.
  std::unique_ptr<StandbyPool> standby_pool_;

  // Last: its thread calls back into the members above.
  std::string lease_file_;
  std::unique_ptr<WorkerLease> lease_;
};

// A JobFinished root cause as root_cause.h's record (global rank etc.).
WorkerFailure FailureFromProto(const v1::Failure& failure);
// The WorkerExited message of a supervisor event (header.generation set).
// `stack`: the hung worker's Python stack, appended to its error message.
v1::AgentMessage WorkerExitedMessage(int64_t generation, const WorkerExit& exit,
                                     const std::string& stack = "");

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_AGENT_H_
