#ifndef DDP_CLIENT_WORKER_SUPERVISOR_H_
#define DDP_CLIENT_WORKER_SUPERVISOR_H_

// Runs the workers of ONE generation on this node: starts them, routes their
// output, reports each exit (and each hang) the moment it happens, and stops
// them as a group. A new generation gets a new WorkerSupervisor.
//
// Lifecycle:
//
//   constructed --Start()--> running --Stop()--> stopped
//        |                      |  (workers exit on their own: still "running"
//        |                      |   until Stop; AwaitAllExited() tells when all
//        did)
//        +------ destructor: Stop(options.destructor_stop_timeout) if needed
//
// Events (one named thread, "worker-monitor", runs an epoll loop over):
//   - each worker's pidfd: readable when it exits -> waitpid (always reaped,
//   never a zombie)
//     -> its pipes drained -> its TORCHELASTIC_ERROR_FILE read -> ExitCallback;
//   - each worker's stdout/stderr pipe -> OutputRouter (files per
//   --redirects/--tee,
//     console lines "[rank<R>]: ..." honoring --local-ranks-filter);
//   - a timerfd every `check_interval` when hang detection is on:
//   heartbeat-file mtimes ->
//     HeartbeatTracker -> a hang is reported once through the ExitCallback
//     (kind kHung; the process keeps running until the caller stops the group).
//     A worker that never touched its heartbeat file (an unmodified script) is
//     judged by its process group's CPU time, I/O bytes and state instead
//     (by its own process tree in a group shared with other workers: an
//     interactive run), sampled every `activity_sample_interval`
//     (ActivityTracker): it is hung
//     once it did nothing for `hang_timeout` while no running worker of the
//     node did anything either (one rank saving a checkpoint while the others
//     wait for it is progress). Such a hang is found at most hang_timeout +
//     activity_sample_interval + check_interval after the last activity.
//     Only when the node is the whole job (Options::declare_idle_hangs);
//     otherwise each worker's idleness is published (WorkerState::idle_since)
//     for the coordinator to judge job-wide.
//     Peers of a stuck worker block in the next collective and go silent as
//     well: of the workers found hung in one check the one with the oldest
//     heartbeat (hang_order.h) is the hang, the others, and any hang found in
//     a later check, are knock-on hangs (knock_on_of_rank set);
//   - an eventfd that wakes the loop for shutdown.
// Workers are forked from the monitor thread, because PR_SET_PDEATHSIG fires
// when the forking *thread* ends: the workers die with that thread, i.e. with
// the agent.
//
// Stop(timeout): SIGTERM to every worker's process group (a group shared by
// the workers of an interactive run once); when the leaders have
// exited and the groups are empty, done; otherwise SIGKILL to the groups at the
// deadline, then wait up to `kill_grace` for them to vanish. Returns once every
// worker is reaped. Grandchildren are orphans reparented to init: they are
// killed through their group, but the supervisor cannot reap them (no
// subreaper, so as not to steal other children). A worker stopped by someone
// else gets SIGCONT after the polite signal (as systemd does). Frozen workers
// (Freeze) get SIGKILL at once: they are not asked, because a frozen
// generation may have been superseded and must not run another instruction (a
// SIGTERM handler that writes a checkpoint).
//
// In-process restart (the agent's --in-process-restart): the supervisor then
// outlives its first generation. StopRanks stops some workers only (the
// failed rank, the survivors that did not come back); Replace starts a new
// worker in the slot of one that exited (on the monitor thread, so the new
// worker dies with the agent too); Reassign gives a surviving worker its next
// generation's spec (files watched, rank, hang tracking restarted). Its
// stdout/stderr keep going where they went (the files of the generation it
// was started in).
//
// Freeze/Thaw (the agent's lease, worker_lease.h): SIGSTOP / SIGCONT to every
// worker's process group. While frozen, hang detection is paused, and the time
// frozen never counts as a worker's heartbeat silence.
//
// Thread-safety: every public method is thread-safe. The ExitCallback runs on
// the monitor thread, without internal locks held; it must not block long, and
// must not call Stop() (that returns FAILED_PRECONDITION there): post the
// decision to another thread.

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/activity_tracker.h"
#include "client/error_file.h"
#include "client/std_streams.h"
#include "client/stderr_tail.h"
#include "client/worker_env.h"
#include "client/worker_files.h"
#include "client/worker_process.h"
#include "common/clock.h"

namespace ddp::client {

struct WorkerSpec {
  int local_rank = 0;
  int global_rank = 0;
  std::vector<std::string> argv;  // argv[0] is looked up on PATH
  EnvMap env;                     // the complete environment
  WorkerFiles files;              // directory created; stale error/heartbeat files removed
  // As torchrun: a stream neither redirected nor teed goes to the agent's
  // console as the worker writes it (the worker holds the console's
  // descriptor: byte for byte, no prefix); redirected, to the log file only;
  // teed, to the log file and, line by line with `console_prefix`, to the
  // console (tee wins over redirect).
  Std redirect = Std::kNone;
  Std tee = Std::kNone;
  // false: --local-ranks-filter leaves this rank's teed lines off the console
  // (torchrun applies the filter to teed output only).
  bool show_on_console = true;
  std::string console_prefix;  // torchrun's "[default0]:" (role, local rank)
  // true: stderr that is neither redirected nor teed still passes through the
  // agent (bytes unchanged, as they come, to the console and to
  // files.stderr_log), so that a failure carries its tail (stderr_tail.h).
  // false: the worker writes to the console's descriptor itself (the
  // interactive worker that owns the terminal).
  bool capture_stderr = true;
  // --prewarm: a standby of a rank other than 0 starts once MASTER_ADDR:MASTER_PORT
  // listens (torch's store client, refused, sleeps a whole second before it tries
  // again). false: the worker waits for the store itself, and its start overlaps the
  // store's (an in-process restart's new rank: ddp_coordinator.recovery polls for it).
  bool await_master = true;
};

struct WorkerExit {
  enum class Kind { kExited, kSignaled, kHung };
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;
  Kind kind = Kind::kExited;
  int exit_code = 0;          // kExited
  int signal = 0;             // kSignaled
  absl::Time time;            // when the supervisor saw it (Clock::Now())
  absl::Duration silent_for;  // kHung: time since the last heartbeat (or activity)
  absl::Time last_heartbeat;  // kHung: when the last touch (or activity) was seen
  // kHung: what the process looked like ("process stopped (state T ...)"),
  // empty when nothing stood out; see hang_order.h.
  std::string evidence;
  // kHung: what was silent: its heartbeat file (touched before), or, for a
  // worker that never touched it, its process group's CPU and I/O.
  enum class HangSignal { kHeartbeat, kIdle };
  HangSignal hang_signal = HangSignal::kHeartbeat;
  bool process_stopped = false;  // kHung: state T/t: certainly not a victim
  // kHung: the global rank of the older hang on this node that this one is
  // blamed on (its peer stopped, so it blocked); -1: a hang of its own.
  int knock_on_of_rank = -1;
  std::optional<ErrorFileContent> error;  // from the error file, or the exec failure
  std::string error_file;
  // The last lines of the worker's stderr (stderr_tail.h limits), values of
  // secrets of its environment redacted; empty when nothing was captured.
  std::string stderr_tail;
  // The last Python traceback in stderr_tail; empty when there is none.
  std::string stderr_traceback;
  // Where its whole stderr is (files.stderr_log); empty when not written.
  std::string stderr_log;
  bool during_stop = false;  // the exit followed a Stop() order

  bool succeeded() const { return kind == Kind::kExited && exit_code == 0; }
  bool knock_on() const { return knock_on_of_rank >= 0; }
  // "exit code 3", "signal SIGKILL", "hang: no heartbeat for 30.0 s",
  // "hang: no CPU or I/O for 10.4 s".
  std::string Describe() const;
};

// Per-worker view for heartbeats to the coordinator.
struct WorkerState {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;
  bool running = false;
  std::optional<WorkerExit> exit;  // set once it exited
  bool hung = false;
  // When its process group last did something (on the supervisor's clock),
  // set while it has been idle for more than Options::idle_report_after: judged
  // (ActivityTracker), running, and never touched its heartbeat file. What
  // the agent reports for the job-wide rule (session.proto WorkerState.idle_ms).
  std::optional<absl::Time> idle_since;
  // Its process group's CPU time over the last kDefaultCpuBusyWindow per wall
  // second, in per-mille of one core (CpuBusyWindow); 0 until measured, and
  // while hang detection is off (Options::hang_timeout zero: no samples).
  int cpu_busy_permille = 0;
};

// Which of the worker's streams it writes to the console itself (the
// console's descriptor; the worker holds it): those neither redirected nor
// teed, as torchrun. The others (-1) go through a pipe to an OutputRouter.
WorkerStdio DirectConsoleTargets(const WorkerSpec& spec, int console_out_fd, int console_err_fd);

class WorkerSupervisor {
 public:
  struct Options {
    absl::Duration heartbeat_timeout = absl::Minutes(5);  // zero disables hang detection
    absl::Duration check_interval = absl::Milliseconds(100);
    // Workers that never touch their heartbeat file: this long without CPU
    // or I/O on the whole node is a hang (ActivityTracker). Zero disables.
    absl::Duration hang_timeout = kDefaultHangTimeout;
    absl::Duration activity_sample_interval = absl::Seconds(1);
    // True: the node is the whole job (a generation of one node, --standalone):
    // the supervisor reports the idle hang itself, as above. False (a node of
    // a multi-node generation): it only publishes each worker's idleness
    // (WorkerState::idle_since), and the coordinator declares the hang when
    // every node is idle (coordinator/rendezvous/idle_hang.h): one node's
    // ranks waiting in a barrier while another node's rank works alone are
    // not hung.
    bool declare_idle_hangs = true;
    // A worker is published idle after this long without activity: longer
    // than one sample, so that a busy worker's states do not flap.
    absl::Duration idle_report_after = absl::Seconds(2);
    absl::Duration kill_grace = absl::Seconds(5);  // after SIGKILL, for groups to vanish
    absl::Duration destructor_stop_timeout = absl::Seconds(30);
    int console_out_fd = 1;  // where console stdout lines go
    int console_err_fd = 2;
    // >= 0: an interactive run (the agent in the foreground of this terminal,
    // IsForegroundTerminal): the workers share one process group, led by the
    // first one started, which takes the terminal's foreground at start; so
    // every worker can read it (each typed line goes to whichever reads
    // first) and the terminal's Ctrl-C reaches them all, as under torchrun.
    // The agent takes the terminal back once no worker of that group runs.
    // A --prewarm standby (Options::launch) leads its own group, made before
    // the terminal was known, in the background; workers started after a
    // standby that came first join its group. -1: every worker leads its own
    // group, in the background.
    int terminal_fd = -1;
    size_t max_line_bytes = 64 << 10;
    ErrorFileLimits error_file_limits;
    StderrTailLimits stderr_tail_limits;
    // Starts one worker with the descriptors of DirectConsoleTargets (a
    // --prewarm StandbyPool hands over a warm interpreter here); called on
    // the monitor thread. null: SpawnWorker, a cold start.
    std::function<absl::StatusOr<SpawnedWorker>(const WorkerSpec&, const WorkerStdio&)> launch;
  };
  using ExitCallback = std::function<void(const WorkerExit&)>;

  WorkerSupervisor(Options options, const Clock& clock, ExitCallback on_exit);
  ~WorkerSupervisor();
  WorkerSupervisor(const WorkerSupervisor&) = delete;
  WorkerSupervisor& operator=(const WorkerSupervisor&) = delete;

  // Starts the monitor thread and every worker.
  // Possible errors: FAILED_PRECONDITION (called twice), INVALID_ARGUMENT (no
  // workers, empty argv), INTERNAL (directory, log file, pipe, fork or pidfd
  // failure, named). After an error some workers may run: call Stop() (the
  // destructor does).
  absl::Status Start(std::vector<WorkerSpec> specs);

  // Stops every worker (see above). Idempotent. `first_signal` other than
  // SIGTERM (the agent's own SIGINT, a Ctrl-C forwarded so that `except
  // KeyboardInterrupt` code runs, or SIGHUP from a closed terminal): that
  // signal, SIGTERM after half of `timeout`, SIGKILL after all of it.
  // Possible errors: FAILED_PRECONDITION (called from the ExitCallback),
  // DEADLINE_EXCEEDED (a process group survived SIGKILL + kill_grace; pgids
  // named).
  absl::Status Stop(absl::Duration timeout, int first_signal = SIGTERM);

  // Stops the workers of `local_ranks` only (SIGTERM, SIGKILL after
  // `timeout`), the others run on; their exits are reported with during_stop.
  // A worker whose group holds workers that run on (an interactive run) is
  // signalled with its process tree instead (SignalProcessTree): what it
  // orphaned before is not reached, and ends with the group at Stop().
  // Blocks until they are reaped. Idempotent per worker.
  // Possible errors: FAILED_PRECONDITION (before Start, after Stop, or from
  // the ExitCallback), DEADLINE_EXCEEDED (as Stop).
  absl::Status StopRanks(const std::vector<int>& local_ranks, absl::Duration timeout);

  // Starts `spec` in the slot of local rank spec.local_rank, whose worker has
  // exited (with Options::launch, as Start). Returns once it is spawned.
  // Possible errors: FAILED_PRECONDITION (no such slot, its worker still
  // runs, not started or stopped), INTERNAL (as Start).
  absl::Status Replace(WorkerSpec spec);

  // A surviving worker of slot spec.local_rank takes part in the next
  // generation: `spec`'s files are watched from now on (heartbeat, error
  // file), its rank is spec.global_rank, its hang tracking starts afresh.
  // The process and its output routing are unchanged.
  // Possible errors: FAILED_PRECONDITION (no such slot, its worker exited,
  // not started or stopped).
  absl::Status Reassign(WorkerSpec spec);

  // SIGSTOP to every worker's process group: no instruction of theirs runs
  // until Thaw (descendants that left the group are not reached, as for
  // Stop). Idempotent; nothing before Start() or after Stop(). During Start()
  // (a lease that ran out while the workers were being spawned) the workers
  // are stopped as soon as they are all spawned, before Start returns.
  void Freeze();
  // SIGCONT to the groups frozen by Freeze; the time they were frozen is
  // forgiven by hang detection. Idempotent.
  void Thaw();
  bool frozen() const;

  // Workers whose process is stopped (state T or t) by someone else than
  // Freeze (a stray SIGSTOP, a debugger) and not reported hung yet, as hangs
  // with that evidence (process_stopped; last_heartbeat from the heartbeat
  // file when it was touched). The agent reports them before a group stop
  // kills them: a stopped rank stalls its peers, and the peers' hangs must
  // not be taken for the cause. Empty while frozen.
  std::vector<WorkerExit> StoppedWorkers() const;

  // Blocks until every worker has exited or `timeout` passed; true when all
  // exited (also when none was started).
  bool AwaitAllExited(absl::Duration timeout);
  std::vector<WorkerState> Workers() const;

 private:
  struct Worker;
  class EventLoop;

  // Called on the monitor thread: updates the state, then runs the callback
  // unlocked.
  void RecordExit(size_t index, WorkerExit exit);
  void RecordHang(size_t index, WorkerExit hang);
  // Stops the workers at `indices` (of states_).
  absl::Status StopIndices(const std::vector<size_t>& indices, absl::Duration timeout,
                           int first_signal);
  bool AllExitedLocked(const std::vector<size_t>& indices) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllExitedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `signal` to the group of every running worker, a shared group once.
  void SignalRunningGroupsLocked(int signal) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Replace and Reassign: the slot change, made on the monitor thread.
  absl::Status RunOnMonitor(WorkerSpec spec, bool respawn);

  const Options options_;
  const Clock& clock_;
  const ExitCallback on_exit_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool frozen_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time frozen_at_ ABSL_GUARDED_BY(mu_);  // on clock_
  // Frozen time the monitor loop has not yet forgiven in the trackers.
  absl::Duration unforgiven_pause_ ABSL_GUARDED_BY(mu_);
  std::vector<WorkerState> states_ ABSL_GUARDED_BY(mu_);
  // Slots StopRanks is stopping or stopped (their exits are during_stop).
  std::vector<bool> stop_requested_ ABSL_GUARDED_BY(mu_);
  // Each slot's process group (its pid, or an interactive run's shared
  // group); -1 before it is spawned.
  std::vector<pid_t> process_groups_ ABSL_GUARDED_BY(mu_);
  // A Replace or Reassign for the monitor thread, and its answer.
  struct SlotRequest {
    WorkerSpec spec;
    bool respawn = false;
    std::optional<absl::Status> result;
  };
  SlotRequest* slot_request_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::optional<absl::Status> spawn_result_ ABSL_GUARDED_BY(mu_);  // set by the loop
  bool quit_ ABSL_GUARDED_BY(mu_) = false;                         // the loop exits once set
  bool start_done_ ABSL_GUARDED_BY(mu_) = false;  // Start() finished (loop_, monitor_ set)
  std::unique_ptr<EventLoop> loop_;               // set in Start, before the thread runs
  std::thread monitor_;
  std::thread::id monitor_id_ ABSL_GUARDED_BY(mu_);

  friend class EventLoop;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_WORKER_SUPERVISOR_H_
