#ifndef DDP_CLIENT_PREWARM_STANDBY_POOL_H_
#define DDP_CLIENT_PREWARM_STANDBY_POOL_H_

// ddp-client --prewarm MODULE[,MODULE...]: one standby interpreter per local
// rank, with MODULE... already imported, handed over as the worker when its
// generation starts. What the import costs (seconds for torch) is then paid
// before the failure, not after it.
//
// A standby is the worker's own command line (`PY -u SCRIPT ARGS` or
// `PY -u -m MODULE ARGS`) with its rank's static environment (StaticPart of
// worker_env.h: everything but the generation's variables) and PYTHONPATH
// led by a directory holding sitecustomize.py (client/prewarm/): the
// interpreter imports that while it starts, and there the standby has
// MODULE... imported, says "ready" on descriptor 3 (a socket to this pool)
// and waits. Launch() sends the generation's complete environment over the
// socket and closes it; the interpreter sets os.environ to it and goes on to
// run the entry point as __main__ itself, as a cold start does.
//
// The zygote (options.zygote; issue 27, "warm at any moment"). One
// interpreter per pool, started as a standby would be but with the node's
// static environment (NodePart: without LOCAL_RANK and DDP_RECOVERY_DIR),
// imports MODULE... once and then, instead of becoming a worker, forks the
// standbys: a standby costs a fork (19-56 ms with torch imported, on a loaded
// 2-core machine), not an import (seconds).
// So a refill right after a start is ready at once (a failure 1 s after a
// start finds a warm standby), and N ranks cost one import, not N.
//
//   pool --(SOCK_SEQPACKET, the zygote's descriptor 3)--> zygote
//     "fork I\0" + the rank's static environment (EncodeStartMessage), with
//     SCM_RIGHTS: the standby's stdout and stderr (the console's descriptor,
//     or a pipe this pool made, whose read end the supervisor drains as for
//     SpawnWorker) and its own descriptor 3 (a socket to this pool)
//   zygote: fork -> intermediate: fork -> standby; the intermediate exits at
//     once; the zygote reaps it and answers "forked PID"
//   standby: setpgid(0, 0) (pid == pgid, as SpawnWorker's children); once
//     re-parented to the agent, PR_SET_PDEATHSIG(SIGKILL), then exits if its
//     parent is not the agent (the agent died meanwhile); SCHED_IDLE when
//     asked; its descriptors to 1, 2, 3; os.environ := its rank's static
//     environment; says "ready": from here exactly a standby of above.
//
// Whose child is the standby: the agent's. The pool makes this process a
// child subreaper (OrphanReaper, orphan_reaper.h), so the standby, orphaned
// by its intermediate, is re-parented to the agent: WorkerSupervisor
// waitpid()s it, watches its pidfd and signals its group exactly as for a
// worker it forked (the pool checks /proc/PID/stat's parent before using it).
// The subreaper also inherits every other orphaned descendant (a dead
// worker's data-loader children); OrphanReaper reaps those (zombies that do
// not lead their group, or lead a session) and never a group leader of the
// agent's session, so no worker's exit status is stolen. The alternative -- the zygote reaps and
// reports exit statuses over its socket -- was not taken: the zygote's death would then lose the
// statuses of every running worker (and, with PR_SET_PDEATHSIG relative to
// the zygote, kill them); here a zygote that dies costs only the next
// standbys' speed.
//
// Dying with the agent: PR_SET_PDEATHSIG is relative to the parent *thread*.
// Linux re-parents an orphan to a live thread of the subreaper, the thread
// group leader first (checked: an orphan of a child forked by another,
// living thread is listed in the main thread's /proc/.../children), so a forked standby (and the
// worker it becomes) is killed when the agent's main thread ends -- its process's end (the agent's
// main thread lives as long as the agent) -- where a standby started by
// SpawnWorker dies with the pool's thread. The zygote itself is a SpawnWorker
// child (PR_SET_PDEATHSIG to the pool's thread). Agent killed -9: the kernel
// kills every standby and worker (their parent thread ended) and the zygote;
// an intermediate mid-fork leaves a standby whose parent is not the agent,
// which exits itself.
//
// Fork safety: the zygote runs no thread of its own and only imports; the
// modules must not start threads that a fork would lose (torch's import does
// not; PyTorch's own DataLoader forks after it) nor initialize CUDA (torch
// marks a fork after CUDA's initialization as unable to use CUDA). What the
// import seeded is shared by every fork: the hash seed (PYTHONHASHSEED) is
// the zygote's in every rank; Python's random reseeds itself after a fork and
// the child reseeds numpy's global generator (from the OS, as at import).
//
// Which zygote serves: the one whose argv and NodePart equal the request's
// (every local rank of a node, as a rule); for another, a new zygote replaces
// it, unless a request still waits for the current one (then that request's
// standby is started on its own: two keys at once never make zygotes replace
// each other in turn). Each standby is then still checked by Mismatch() at
// Launch (argv, the rank's static environment, the console descriptors), as
// before. A Launch whose standby the zygote is about to fork (importing
// still) waits for it, as for a standby still importing.
//
// Fallbacks (a log line each; the rank still gets a standby of its own, or
// starts cold, as without a zygote): the zygote cannot import MODULE (e.g. a
// module that reads LOCAL_RANK at import): standbys per rank for that argv
// and environment from then on; the zygote died or did not answer within
// kZygoteReplyTimeout: a new one (three in a row at most, then standbys per
// rank for good); a fork that fails or a standby that is not this process's
// child: that rank's standby is started on its own.
//
//   Prepare(spec)      a standby for spec.local_rank, after `delay`, made on
//                      the pool's thread (its PR_SET_PDEATHSIG thread: the
//                      pool outlives every process it started); with a
//                      zygote that serves it, at once (a fork), whatever
//                      the delay
//   Launch(spec)       the standby of that rank when it can serve: same argv,
//                      same static environment, same console descriptors,
//                      still alive (importing still, or waiting for its
//                      zygote's import: it goes on and starts when done); a
//                      rank other than 0 once MASTER_ADDR:MASTER_PORT
//                      listens (listener_probe.h: PyTorch's store client
//                      sleeps a second when refused, longer than a warm
//                      start takes; not with spec.await_master false); else
//                      a cold SpawnWorker, a log line
//                      with the reason (variable names, never values).
//                      Either way a new standby for the rank is prepared
//                      after `refill_delay` (so it does not compete with the
//                      workers starting now; with idle_cpu_priority it
//                      cannot, and the delay is 0; from a zygote, after
//                      zygote_refill_delay).
//   a standby that cannot import MODULE exits 17; its error is logged once
//   and that rank starts cold until its command or environment changes. A
//   standby killed from outside is replaced after `refill_delay` (three in a
//   row at most).
//
// Time: every delay and deadline is read from the injected Clock (the agent
// passes MonotonicClock; tests a FakeClock). The pool's thread polls at
// least once a second, so it notices a FakeClock moved by a test within that.
//
// Thread-safety: every public method is thread-safe. Launch runs on a
// WorkerSupervisor's monitor thread (WorkerSupervisor::Options::launch).

#include <sys/types.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/prewarm/orphan_reaper.h"
#include "client/worker_env.h"
#include "client/worker_process.h"
#include "client/worker_supervisor.h"
#include "common/clock.h"

namespace ddp::client {

struct StandbyPoolOptions {
  std::vector<std::string> modules;  // what a standby imports (validated dotted names)
  // Imported after `modules` where they can be; one that cannot is skipped
  // without a word (the agent's own ddp_coordinator.recovery under
  // --in-process-restart: a script that does not use it loses nothing).
  std::vector<std::string> optional_modules;
  std::string python_exec = "python3";
  // Where sitecustomize.py is written (created if missing), e.g.
  // RUN_DIR/prewarm.
  std::string site_dir;
  absl::Duration refill_delay = absl::Seconds(3);
  // true: the standbys made after a start (refills, replacements) run at
  // idle CPU priority (SCHED_IDLE) until handed over, when every thread is
  // moved back to SCHED_OTHER (RestoreNormalCpuPriority; the agent sets it
  // when CanRestoreNormalCpuPriority, with refill_delay 0: a refill then
  // imports at once without slowing the workers beside it). Those of
  // Prepare (before any worker runs) run at normal priority.
  bool idle_cpu_priority = false;
  // With idle_cpu_priority: a standby still importing this long after it
  // started (a busy CPU gives SCHED_IDLE next to nothing) goes on at normal
  // priority, as a standby made after refill_delay would.
  absl::Duration idle_import_limit = absl::Seconds(3);
  // A warm worker other than rank 0 is handed over once MASTER_ADDR:
  // MASTER_PORT accepts connections (listener_probe.h), at most this late;
  // when nothing listens by then (a script without torch.distributed's
  // store), the other ranks of that generation do not wait.
  absl::Duration master_wait = absl::Seconds(2);
  // true: standbys are forked by one zygote (see above); false: each
  // standby imports on its own.
  bool zygote = true;
  // A ready zygote forks the refill after a warm start this long after it
  // (whatever refill_delay says), not at the same moment: a fork of an
  // interpreter that imported torch copies its page tables (5-6 ms of CPU
  // each here; two forks and an exit per standby), which would land on the
  // new generation's process-group set-up beside it. Still ready long before
  // a failure 1 s after the start.
  absl::Duration zygote_refill_delay = absl::Milliseconds(250);
  // Where the zygote's own output goes (what the imports print, once).
  int zygote_stdout_fd = 1;
  int zygote_stderr_fd = 2;
};

class StandbyPool {
 public:
  struct Counts {
    int warm_starts = 0;
    int cold_starts = 0;
    int standbys_ready = 0;  // imported and waiting now
    int zygote_forks = 0;    // standbys forked by a zygote
  };

  // Writes sitecustomize.py into options.site_dir and starts the pool's
  // thread. Possible errors: INVALID_ARGUMENT (no modules), INTERNAL (the
  // directory or file, named). `clock` must outlive the pool.
  static absl::StatusOr<std::unique_ptr<StandbyPool>> Create(StandbyPoolOptions options,
                                                             const Clock& clock);
  // Drops every standby (each exits at EOF; SIGKILL after a second) and
  // reaps it.
  ~StandbyPool();
  StandbyPool(const StandbyPool&) = delete;
  StandbyPool& operator=(const StandbyPool&) = delete;

  // A standby for spec.local_rank (replacing the one it has) `delay` from
  // now. Nothing when the command is not `python_exec -u ...`.
  void Prepare(const WorkerSpec& spec, const WorkerStdio& stdio, absl::Duration delay);
  // Starts spec's worker: warm from the rank's standby, else cold (see above).
  absl::StatusOr<SpawnedWorker> Launch(const WorkerSpec& spec, const WorkerStdio& stdio);

  // Blocks until every rank in `local_ranks` has a ready standby or `timeout`
  // passed; true when they all do.
  bool AwaitReady(const std::vector<int>& local_ranks, absl::Duration timeout);
  Counts counts() const;
  // Local rank -> pid of its standby (diagnostics, tests).
  std::map<int, pid_t> StandbyPids() const;
  // The zygote's pid; -1 when there is none (diagnostics, tests).
  pid_t ZygotePid() const;

 private:
  struct Standby;
  struct Request {
    std::vector<std::string> argv;
    EnvMap static_env;
    WorkerStdio stdio;
    absl::Time due;
    bool idle = false;  // at SCHED_IDLE (a refill with idle_cpu_priority)
    // When a ready zygote forks it (`due` is for a standby of its own).
    absl::Time fork_due;
  };

  StandbyPool(StandbyPoolOptions options, const Clock& clock);
  void Loop();
  // On the pool's thread.
  void StartDue() ABSL_LOCKS_EXCLUDED(mu_);
  // Prepare, with `idle`: the standby starts at SCHED_IDLE; a ready zygote
  // forks it after `fork_delay` (whatever `delay` says).
  void PrepareStandby(const WorkerSpec& spec, const WorkerStdio& stdio, absl::Duration delay,
                      bool idle, absl::Duration fork_delay = absl::ZeroDuration());
  void ReadMessages() ABSL_LOCKS_EXCLUDED(mu_);
  // idle_cpu_priority: standbys importing past idle_import_limit to normal.
  void PromoteSlowImports() ABSL_LOCKS_EXCLUDED(mu_);
  void ReapRetired() ABSL_LOCKS_EXCLUDED(mu_);
  // `static_env` with PYTHONPATH led by site_dir (a standby's or zygote's).
  EnvMap StandbyEnvironment(const EnvMap& static_env) const;
  // A standby of its own for `request` (SpawnWorker), as without a zygote.
  void StartAlone(int local_rank, const Request& request) ABSL_LOCKS_EXCLUDED(mu_);
  // A Standby record for `request` at local_rank, started now (no process yet).
  std::unique_ptr<Standby> NewStandby(int local_rank, const Request& request) const;
  // DDP_PREWARM_MODULES: the modules, then the optional ones marked '?'.
  std::string ModulesToImport() const;
  // A zygote for `request`'s argv and NodePart, replacing the one there is.
  void StartZygote(const Request& request) ABSL_LOCKS_EXCLUDED(mu_);
  // `request`'s standby forked by the zygote; on error the caller starts it
  // alone. Possible errors: UNAVAILABLE (the zygote is gone or did not
  // answer: retired), INTERNAL (a descriptor, the fork, the standby's
  // parent; named).
  absl::StatusOr<std::unique_ptr<Standby>> ForkFromZygote(int local_rank, const Request& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The zygote's "ready" or its end (import error, death).
  void ReadZygoteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `request` is (to be) served by a zygote: zygotes are on and no
  // zygote of its argv and NodePart failed to import.
  bool ForZygoteLocked(const Request& request) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the current zygote is alive and made for `request`.
  bool ZygoteServesLocked(const Request& request) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Wake();
  // Blocks until rank 0's store listens (see master_wait); not for rank 0.
  void AwaitMaster(const WorkerSpec& spec);
  // Why `standby` cannot serve `spec`; empty when it can.
  std::string Mismatch(const Standby& standby, const WorkerSpec& spec,
                       const WorkerStdio& stdio) const;
  void RetireLocked(std::unique_ptr<Standby> standby) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StandbyPoolOptions options_;
  const Clock& clock_;
  int wake_fd_ = -1;

  mutable absl::Mutex mu_;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int, Request> requests_ ABSL_GUARDED_BY(mu_);                   // by local rank
  std::map<int, std::unique_ptr<Standby>> standbys_ ABSL_GUARDED_BY(mu_);  // by local rank
  // Dropped standbys not yet reaped.
  std::vector<std::unique_ptr<Standby>> retired_ ABSL_GUARDED_BY(mu_);
  // Rank -> the argv + static environment whose import failed (not retried).
  std::map<int, std::string> failed_ ABSL_GUARDED_BY(mu_);
  // Rank -> standbys that died unused in a row (reset by a warm start).
  std::map<int, int> deaths_ ABSL_GUARDED_BY(mu_);
  // MASTER_ADDR:MASTER_PORT that did not listen within master_wait.
  std::string master_not_listening_ ABSL_GUARDED_BY(mu_);
  Counts counts_ ABSL_GUARDED_BY(mu_);
  // Ranks whose standby the zygote forks now (out of requests_, not yet in
  // standbys_: a Launch waits for them).
  std::set<int> forking_ ABSL_GUARDED_BY(mu_);
  // Sockets of handed-over standbys, closed on the pool's thread (which may
  // be polling them).
  std::vector<int> closing_ ABSL_GUARDED_BY(mu_);
  // The zygote (a Standby whose local_rank is -1 and static_env its NodePart).
  std::unique_ptr<Standby> zygote_ ABSL_GUARDED_BY(mu_);
  // Key() of the argv + NodePart whose zygote could not import.
  std::string zygote_failed_ ABSL_GUARDED_BY(mu_);
  int zygote_deaths_ ABSL_GUARDED_BY(mu_) = 0;  // in a row
  // No zygote any more (too many deaths, no subreaper, a foreign child).
  bool zygote_off_ ABSL_GUARDED_BY(mu_) = false;
  // Makes the forked standbys this process's children (options.zygote).
  std::unique_ptr<OrphanReaper> reaper_;
  std::thread thread_;
};

// True when `argv` is a Python worker a standby can be: `python_exec -u ...`.
bool IsWarmableCommand(const std::vector<std::string>& argv, const std::string& python_exec);

// The start message: the environment's KEY=VALUE entries, each ended by a
// NUL, then one more NUL (the standby runs nothing on a message cut short).
std::string EncodeStartMessage(const EnvMap& env);

}  // namespace ddp::client

#endif  // DDP_CLIENT_PREWARM_STANDBY_POOL_H_
