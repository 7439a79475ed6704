#ifndef DDP_CLIENT_WORKER_PROCESS_H_
#define DDP_CLIENT_WORKER_PROCESS_H_

// Starting one worker process (fork + exec) and the process-group signalling
// around it.
//
// The child:
//  - leads its own process group (setpgid(0, 0); the parent does it too, so
//  there is no
//    window where a signal to the group misses it), so SIGTERM/SIGKILL to the
//    group also reach anything the worker starts; or joins the group of
//    WorkerStdio::process_group the same way (an interactive run's workers
//    share the terminal's foreground group, as under torchrun);
//  - has PR_SET_PDEATHSIG(SIGKILL): it dies when the thread that forked it
//  dies. The agent
//    must therefore fork from a thread that lives as long as the workers (the
//    supervisor's monitor thread). If the parent died before prctl took effect,
//    getppid() no longer matches and the child exits at once;
//  - gets default signal dispositions and an empty signal mask (the agent may
//  ignore
//    SIGPIPE or block signals; exec does not reset those);
//  - writes stdout/stderr into pipes the parent reads; stdin is inherited.
// Exec failures (no such file, not executable) come back through a
// close-on-exec pipe as errno text; the child then exits 127 and `exec_error`
// says why.
//
// Thread-safety: SpawnWorker may be called from any thread (it only touches its
// arguments); the returned file descriptors belong to the caller.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddp::client {

struct SpawnedWorker {
  pid_t pid = -1;      // the process group id too, unless it joined another
  int pidfd = -1;      // readable when the process exits (pidfd_open)
  int stdout_fd = -1;  // read ends, non-blocking, close-on-exec
  int stderr_fd = -1;
  std::string exec_error;  // non-empty when exec failed (the child exits 127)
};

// Where the child's stdout and stderr go: -1, a pipe the caller reads
// (SpawnedWorker::stdout_fd/stderr_fd); otherwise that descriptor of the
// caller (e.g. its own console), written by the child directly, byte for byte.
struct WorkerStdio {
  int stdout_target = -1;
  int stderr_target = -1;
  // >= 0: this descriptor of the caller becomes the child's descriptor 3
  // (a standby's start-message pipe, client/prewarm/); -1: none.
  int control_fd = -1;
  // >= 0: a terminal (the agent's stdin) whose foreground the child's
  // process group takes before exec, so that the worker can read it (input(),
  // pdb) and Ctrl-C reaches it, as under torchrun; -1: the child stays in the
  // background of any terminal.
  int terminal_fd = -1;
  // > 0: the child joins this process group (of a worker started before, in
  // the same session) instead of leading its own; when that group is gone by
  // then, it leads its own after all (never stays in the caller's group).
  // The group's terminal foreground, if any, is the group's already:
  // terminal_fd is then not needed.
  pid_t process_group = 0;
  // true: the child runs at idle CPU priority (SCHED_IDLE, set before exec,
  // inherited by its threads): a --prewarm standby importing beside running
  // workers takes only CPU time they leave unused.
  bool idle_cpu_priority = false;
};

// Whether this process may move a child from SCHED_IDLE back to SCHED_OTHER
// (CAP_SYS_NICE, or RLIMIT_NICE allowing nice 0; see sched(7)).
bool CanRestoreNormalCpuPriority();

// Every thread of `pid` to SCHED_OTHER (the default policy, nice unchanged).
// Possible errors: PERMISSION_DENIED (see CanRestoreNormalCpuPriority),
// NOT_FOUND (the process is gone), INTERNAL (other errno, named).
absl::Status RestoreNormalCpuPriority(pid_t pid);

// True when `fd` is a terminal and this process's group is its foreground
// (the agent runs in the foreground of a shell): an interactive run.
bool IsForegroundTerminal(int fd);

// This process's group takes the terminal's foreground back (after the worker
// that held it exited or was stopped). SIGTTOU is blocked in the calling
// thread for the call, as a background process must. No-op for fd < 0.
void ReclaimTerminal(int fd);

// Possible errors: INVALID_ARGUMENT (empty argv), INTERNAL
// (pipe/fork/pidfd_open failed; errno text named). On error nothing is left
// running and no descriptor is leaked.
absl::StatusOr<SpawnedWorker> SpawnWorker(const std::vector<std::string>& argv,
                                          const std::vector<std::string>& env,
                                          WorkerStdio stdio = {});

// True while any process is in group `pgid` (kill(-pgid, 0)).
bool ProcessGroupAlive(pid_t pgid);

// Sends `signal` to group `pgid`; a group that is already gone is not an error.
void SignalProcessGroup(pid_t pgid, int signal);

// Sends `signal` to `pid` and to every descendant it has now (by parent pid,
// whatever their group): one worker of a group it shares with others. A
// process that is gone is not an error.
void SignalProcessTree(pid_t pid, int signal);

// "SIGKILL", "SIGSEGV", ...; "SIG<n>" for numbers without a name.
std::string SignalName(int signal);

}  // namespace ddp::client

#endif  // DDP_CLIENT_WORKER_PROCESS_H_
