#include "tools/rdzv_sim/coordinator_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ddp::rdzv_sim {
namespace {

// Returns the exit status, -1 for a signal, or -2 if still running.
int Reap(pid_t pid, bool block) {
  int status = 0;
  const pid_t got = waitpid(pid, &status, block ? 0 : WNOHANG);
  if (got == 0) return -2;
  if (got < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorChild>> CoordinatorChild::Start(
    CoordinatorChildOptions options) {
  if (access(options.binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("coordinator binary '", options.binary,
                     "' is not executable; build //coordinator first or pass "
                     "--coordinator-binary"));
  }
  std::unique_ptr<CoordinatorChild> child(new CoordinatorChild(std::move(options)));
  const CoordinatorChildOptions& o = child->options_;
  const std::string port_file = absl::StrCat(o.work_dir, "/port");
  unlink(port_file.c_str());
  std::vector<std::string> args = {o.binary,     "--port",   "0",      "--port-file", port_file,
                                   "--data-dir", o.data_dir, "--bind", o.bind};
  args.insert(args.end(), o.extra_args.begin(), o.extra_args.end());
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const std::string log = child->log_path();

  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  child->pid_ = pid;

  const absl::Time deadline = absl::Now() + o.start_timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(port_file);
    int port = 0;
    if (in >> port && port > 0) {
      child->port_ = port;
      return child;
    }
    const int exited = Reap(pid, /*block=*/false);
    if (exited != -2) {
      child->pid_ = -1;
      return absl::UnavailableError(
          absl::StrCat("coordinator exited (status ", exited, ") before serving; see ", log));
    }
    absl::SleepFor(o.poll_interval);
  }
  return absl::UnavailableError(absl::StrCat("coordinator wrote no port file within ",
                                             absl::FormatDuration(o.start_timeout), "; see ", log));
}

CoordinatorChild::~CoordinatorChild() { Stop(); }

std::string CoordinatorChild::target() const { return absl::StrCat(options_.bind, ":", port_); }

std::string CoordinatorChild::log_path() const {
  return absl::StrCat(options_.work_dir, "/coordinator.log");
}

int CoordinatorChild::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + options_.stop_timeout;
  int status = Reap(pid_, /*block=*/false);
  while (status == -2 && absl::Now() < deadline) {
    absl::SleepFor(options_.poll_interval);
    status = Reap(pid_, /*block=*/false);
  }
  if (status == -2) {
    kill(pid_, SIGKILL);
    Reap(pid_, /*block=*/true);
    status = -1;
  }
  pid_ = -1;
  return status;
}

}  // namespace ddp::rdzv_sim
