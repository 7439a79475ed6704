#ifndef DDP_CLIENT_PREWARM_STANDBY_POOL_H_
#define DDP_CLIENT_PREWARM_STANDBY_POOL_H_

// ddp-client --prewarm MODULE[,MODULE...]: one standby interpreter per local
// rank, with MODULE... already imported, handed over as the worker when its
// generation starts. What the import costs (seconds for torch) is then paid
// before the failure, not after it.
//
// A standby is the worker's own command line (`PY -u SCRIPT ARGS` or
// `PY -u -m MODULE ARGS`) started with its rank's static environment
// (StaticPart of worker_env.h: everything but the generation's variables) and
// PYTHONPATH led by a directory holding sitecustomize.py (client/prewarm/):
// the interpreter imports that while it starts, and there the standby imports
// MODULE..., says "ready" on descriptor 3 (a socket to this pool) and waits.
// Launch() sends the generation's complete environment over the socket and
// closes it; the interpreter sets os.environ to it and goes on to run the
// entry point as __main__ itself, as a cold start does.
//
//   Prepare(spec)      a standby for spec.local_rank, after `delay`, made on
//                      the pool's thread (its PR_SET_PDEATHSIG thread: the
//                      pool outlives every process it started)
//   Launch(spec)       the standby of that rank when it can serve: same argv,
//                      same static environment, same console descriptors,
//                      still alive (importing still: it goes on and starts
//                      when done); a rank other than 0 once MASTER_ADDR:
//                      MASTER_PORT listens (listener_probe.h: PyTorch's store
//                      client sleeps a second when refused, longer than a
//                      warm start takes); else a cold SpawnWorker, a log line
//                      with the reason (variable names, never values). Either
//                      way a new standby for the rank is prepared after
//                      `refill_delay` (so it does not compete with the
//                      workers starting now; with idle_cpu_priority it
//                      cannot, and the delay is 0).
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
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/worker_env.h"
#include "client/worker_process.h"
#include "client/worker_supervisor.h"
#include "common/clock.h"

namespace ddp::client {

struct StandbyPoolOptions {
  std::vector<std::string> modules;  // what a standby imports (validated dotted names)
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
};

class StandbyPool {
 public:
  struct Counts {
    int warm_starts = 0;
    int cold_starts = 0;
    int standbys_ready = 0;  // imported and waiting now
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

 private:
  struct Standby;
  struct Request {
    std::vector<std::string> argv;
    EnvMap static_env;
    WorkerStdio stdio;
    absl::Time due;
    bool idle = false;  // at SCHED_IDLE (a refill with idle_cpu_priority)
  };

  StandbyPool(StandbyPoolOptions options, const Clock& clock);
  void Loop();
  // On the pool's thread.
  void StartDue() ABSL_LOCKS_EXCLUDED(mu_);
  // Prepare, with `idle`: the standby starts at SCHED_IDLE.
  void PrepareStandby(const WorkerSpec& spec, const WorkerStdio& stdio, absl::Duration delay,
                      bool idle);
  void ReadMessages() ABSL_LOCKS_EXCLUDED(mu_);
  // idle_cpu_priority: standbys importing past idle_import_limit to normal.
  void PromoteSlowImports() ABSL_LOCKS_EXCLUDED(mu_);
  void ReapRetired() ABSL_LOCKS_EXCLUDED(mu_);
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
  // Sockets of handed-over standbys, closed on the pool's thread (which may
  // be polling them).
  std::vector<int> closing_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// True when `argv` is a Python worker a standby can be: `python_exec -u ...`.
bool IsWarmableCommand(const std::vector<std::string>& argv, const std::string& python_exec);

// The start message: the environment's KEY=VALUE entries, each ended by a
// NUL, then one more NUL (the standby runs nothing on a message cut short).
std::string EncodeStartMessage(const EnvMap& env);

}  // namespace ddp::client

#endif  // DDP_CLIENT_PREWARM_STANDBY_POOL_H_
