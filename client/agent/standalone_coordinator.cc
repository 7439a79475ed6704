#include "client/agent/standalone_coordinator.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace ddp::client {
namespace {

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return remove(path); }

// waitpid with a deadline; true when reaped. A real wait for a real child:
// on CLOCK_MONOTONIC, which a wall-clock step does not cut short or prolong.
bool WaitFor(pid_t pid, absl::Duration timeout, int* status) {
  const Clock& monotonic = MonotonicClock::Get();
  const absl::Time deadline = monotonic.Now() + timeout;
  while (true) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (monotonic.Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

std::string DescribeWait(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("signal ", WTERMSIG(status));
  return "unknown status";
}

}  // namespace

absl::StatusOr<std::vector<std::string>> DefaultServeCommand() {
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    return absl::InternalError(
        absl::StrCat("cannot read /proc/self/exe to serve the coordinator: ", strerror(errno)));
  }
  return std::vector<std::string>{std::string(self, n), kServeCoordinatorArg};
}

absl::StatusOr<std::unique_ptr<StandaloneCoordinator>> StandaloneCoordinator::Start(
    const StandaloneCoordinatorOptions& options) {
  // The coordinator's "address in use" exit code (common/exit_codes.h).
  constexpr int kCoordinatorExitAddressInUse = ddp::kExitAddressInUse;
  std::vector<std::string> args = options.command;
  if (args.empty()) {
    DDP_ASSIGN_OR_RETURN(args, DefaultServeCommand());
  }
  const std::string program = absl::StrJoin(args, " ");
  const char* tmp = getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/ddp_standalone_XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", pattern, ": ", strerror(errno)));
  }
  const std::string port_file = pattern + "/port";
  args.insert(args.end(),
              {"--port", absl::StrCat(options.port), "--bind", options.bind, "--port_file",
               port_file, "--data_dir", pattern + "/data", "--http_port", "0"});
  if (!options.log_level.empty()) {
    args.push_back("--log_level");
    args.push_back(options.log_level);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    if (!options.log_file.empty()) {
      const int log = open(options.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (log < 0) _exit(127);
      dup2(log, STDOUT_FILENO);
      dup2(log, STDERR_FILENO);
      if (log > STDERR_FILENO) close(log);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  std::unique_ptr<StandaloneCoordinator> child(new StandaloneCoordinator(options, pattern, pid));
  DDP_LOG(INFO) << "--standalone: started " << program << " (pid " << pid << ", data in " << pattern
                << ")";
  // A real wait for the child to listen: on CLOCK_MONOTONIC (see WaitFor).
  const Clock& monotonic = MonotonicClock::Get();
  const absl::Time deadline = monotonic.Now() + options.start_timeout;
  while (monotonic.Now() < deadline) {
    std::ifstream in(port_file);
    std::string text;
    int port = 0;
    if (in && std::getline(in, text) && absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) &&
        port > 0) {
      child->address_ = absl::StrCat("127.0.0.1:", port);
      return child;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      child->pid_ = -1;
      if (WIFEXITED(status) && WEXITSTATUS(status) == kCoordinatorExitAddressInUse) {
        return absl::AlreadyExistsError(
            absl::StrCat("port ", options.port, " on ", options.bind, " is already served"));
      }
      return absl::UnavailableError(absl::StrCat(
          "the standalone coordinator (", program, ") ended (", DescribeWait(status),
          ") before serving", options.log_file.empty() ? "" : "; its log: " + options.log_file));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::UnavailableError(absl::StrCat("the standalone coordinator (", program,
                                             ") wrote no port to ", port_file, " within ",
                                             absl::FormatDuration(options.start_timeout)));
}

StandaloneCoordinator::~StandaloneCoordinator() { Stop(); }

void StandaloneCoordinator::Stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int status = 0;
    if (!WaitFor(pid_, options_.stop_timeout, &status)) {
      DDP_LOG(WARNING) << "standalone coordinator (pid " << pid_ << ") ignored SIGTERM; killing it";
      kill(pid_, SIGKILL);
      WaitFor(pid_, absl::Seconds(5), &status);
    }
    pid_ = -1;
  }
  if (!dir_.empty()) {
    nftw(dir_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
  }
}

}  // namespace ddp::client
