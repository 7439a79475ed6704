#include "client/worker_process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/proc_stats.h"

namespace ddp::client {
namespace {

// glibc 2.36's <sys/pidfd.h> lacks extern "C" guards, so call the system call
// directly.
int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

void CloseIfOpen(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, " failed: ", strerror(errno)));
}

// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void ExecChild(pid_t parent, int out_write, int err_write, int control, int terminal,
                            pid_t process_group, bool idle_cpu_priority, int report_write,
                            char* const argv[], char* const envp[]) {
  // Joining a group that is gone fails (EPERM): then a group of its own, so
  // that a signal meant for the worker's group never reaches the agent's.
  if (process_group <= 0 || setpgid(0, process_group) != 0) setpgid(0, 0);
  if (idle_cpu_priority) {
    sched_param param{};
    sched_setscheduler(0, SCHED_IDLE, &param);  // best effort: it only yields CPU
  }
  if (terminal >= 0) {
    // A background group may take the foreground only with SIGTTOU blocked;
    // the mask is reset below.
    sigset_t ttou;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    sigprocmask(SIG_BLOCK, &ttou, nullptr);
    tcsetpgrp(terminal, getpid());
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // the agent died before prctl took effect
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // fails for KILL/STOP
  if (dup2(out_write, STDOUT_FILENO) < 0 || dup2(err_write, STDERR_FILENO) < 0) {
    const int err = errno;
    (void)!write(report_write, &err, sizeof(err));
    _exit(127);
  }
  if (control >= 0) {
    // Descriptor 3 becomes the control pipe; the report pipe moves away if it
    // sits there. dup2 clears close-on-exec on its copy; a control pipe
    // already at 3 keeps its flag, so clear it.
    if (report_write == 3) report_write = fcntl(3, F_DUPFD_CLOEXEC, 10);
    if ((control == 3 ? fcntl(3, F_SETFD, 0) : dup2(control, 3)) < 0) {
      const int err = errno;
      (void)!write(report_write, &err, sizeof(err));
      _exit(127);
    }
  }
  execvpe(argv[0], argv, envp);
  const int err = errno;
  (void)!write(report_write, &err, sizeof(err));
  _exit(127);
}

}  // namespace

absl::StatusOr<SpawnedWorker> SpawnWorker(const std::vector<std::string>& argv,
                                          const std::vector<std::string>& env, WorkerStdio stdio) {
  if (argv.empty() || argv[0].empty()) {
    return absl::InvalidArgumentError("worker command is empty");
  }
  // Everything the child needs is built before fork: allocation after it is not
  // safe.
  std::vector<char*> argv_ptrs, env_ptrs;
  for (const std::string& a : argv) argv_ptrs.push_back(const_cast<char*>(a.c_str()));
  argv_ptrs.push_back(nullptr);
  for (const std::string& e : env) env_ptrs.push_back(const_cast<char*>(e.c_str()));
  env_ptrs.push_back(nullptr);

  int out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {out, err, report}) {
      CloseIfOpen(p[0]);
      CloseIfOpen(p[1]);
    }
  };
  if ((stdio.stdout_target < 0 && pipe2(out, O_CLOEXEC) != 0) ||
      (stdio.stderr_target < 0 && pipe2(err, O_CLOEXEC) != 0) || pipe2(report, O_CLOEXEC) != 0) {
    absl::Status status = ErrnoError("pipe2");
    close_all();
    return status;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    absl::Status status = ErrnoError("fork");
    close_all();
    return status;
  }
  if (pid == 0) {
    ExecChild(parent, stdio.stdout_target >= 0 ? stdio.stdout_target : out[1],
              stdio.stderr_target >= 0 ? stdio.stderr_target : err[1], stdio.control_fd,
              stdio.terminal_fd, stdio.process_group, stdio.idle_cpu_priority, report[1],
              argv_ptrs.data(), env_ptrs.data());
  }
  // As the child does, so that no signal to the group misses it. EACCES after
  // exec is fine: the child did it itself.
  if (stdio.process_group <= 0 || setpgid(pid, stdio.process_group) != 0) setpgid(pid, pid);
  CloseIfOpen(out[1]);
  CloseIfOpen(err[1]);
  CloseIfOpen(report[1]);

  SpawnedWorker worker;
  worker.pid = pid;
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(report[0], &child_errno, sizeof(child_errno));  // EOF at exec
  } while (n < 0 && errno == EINTR);
  CloseIfOpen(report[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    worker.exec_error = absl::StrCat("cannot execute '", argv[0], "': ", strerror(child_errno));
  }
  worker.pidfd = PidfdOpen(pid);
  if (worker.pidfd < 0) {
    absl::Status status = ErrnoError("pidfd_open (Linux 5.3 or later is required)");
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close_all();
    return status;
  }
  fcntl(worker.pidfd, F_SETFD, FD_CLOEXEC);
  if (out[0] >= 0) fcntl(out[0], F_SETFL, O_NONBLOCK);
  if (err[0] >= 0) fcntl(err[0], F_SETFL, O_NONBLOCK);
  worker.stdout_fd = out[0];
  worker.stderr_fd = err[0];
  return worker;
}

bool IsForegroundTerminal(int fd) { return isatty(fd) == 1 && tcgetpgrp(fd) == getpgrp(); }

void ReclaimTerminal(int fd) {
  if (fd < 0 || isatty(fd) != 1) return;
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  pthread_sigmask(SIG_BLOCK, &ttou, &old);
  tcsetpgrp(fd, getpgrp());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

bool ProcessGroupAlive(pid_t pgid) { return pgid > 0 && (kill(-pgid, 0) == 0 || errno == EPERM); }

void SignalProcessGroup(pid_t pgid, int signal) {
  if (pgid > 0) kill(-pgid, signal);
}

void SignalProcessTree(pid_t pid, int signal) {
  if (pid <= 0) return;
  for (pid_t process : ProcessTree(pid)) kill(process, signal);
}

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return absl::StrCat("SIG", signal);
  return absl::StrCat("SIG", abbrev);
}

bool CanRestoreNormalCpuPriority() {
  // CAP_SYS_NICE (bit 23) in the effective set.
  if (FILE* status = fopen("/proc/self/status", "re")) {
    char line[256];
    unsigned long long caps = 0;
    bool found = false;
    while (fgets(line, sizeof(line), status) != nullptr) {
      if (sscanf(line, "CapEff: %llx", &caps) == 1) {
        found = true;
        break;
      }
    }
    fclose(status);
    if (found && (caps & (1ULL << 23)) != 0) return true;
  }
  // Else RLIMIT_NICE must allow nice 0: 20 - 0 <= the soft limit.
  rlimit limit{};
  return getrlimit(RLIMIT_NICE, &limit) == 0 &&
         (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= 20);
}

absl::Status RestoreNormalCpuPriority(pid_t pid) {
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) {
    return errno == ENOENT ? absl::NotFoundError(absl::StrCat("process ", pid, " is gone"))
                           : ErrnoError(absl::StrCat("opendir ", tasks));
  }
  absl::Status status;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const pid_t tid = static_cast<pid_t>(atoi(entry->d_name));
    sched_param param{};
    if (sched_setscheduler(tid, SCHED_OTHER, &param) == 0 || errno == ESRCH) continue;
    status = errno == EPERM ? absl::PermissionDeniedError(absl::StrCat(
                                  "cannot move thread ", tid, " of process ", pid,
                                  " from SCHED_IDLE to SCHED_OTHER (needs CAP_SYS_NICE or "
                                  "RLIMIT_NICE >= 20)"))
                            : ErrnoError(absl::StrCat("sched_setscheduler(", tid, ")"));
    break;
  }
  closedir(dir);
  return status;
}

}  // namespace ddp::client
