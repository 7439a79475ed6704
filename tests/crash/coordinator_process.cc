#include "tests/crash/coordinator_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace ddp::testing {
namespace {

// How often Start polls for the port file.
constexpr absl::Duration kPollInterval = absl::Milliseconds(5);
// Bytes of the log quoted in a start failure.
constexpr size_t kLogTailBytes = 2000;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

std::string CoordinatorBinaryFromRunfiles() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/ddp_coordinator/coordinator/coordinator");
}

CoordinatorProcess::CoordinatorProcess(CoordinatorProcessOptions options)
    : options_(std::move(options)) {}

CoordinatorProcess::~CoordinatorProcess() { Kill9(); }

std::string CoordinatorProcess::PortFilePath() const {
  return absl::StrCat(options_.work_dir, "/coordinator.port");
}

std::string CoordinatorProcess::log_path() const {
  return absl::StrCat(options_.work_dir, "/coordinator.log");
}

std::string CoordinatorProcess::address() const { return absl::StrCat(options_.host, ":", port_); }

absl::Status CoordinatorProcess::Start() {
  if (running()) {
    return absl::FailedPreconditionError("coordinator already running");
  }
  std::remove(PortFilePath().c_str());
  const int port_arg = options_.keep_port_across_restarts && port_ > 0 ? port_ : 0;
  std::vector<std::string> args = options_.command_prefix;
  args.insert(args.end(),
              {options_.binary, "--port", absl::StrCat(port_arg), "--bind", options_.host,
               "--port-file", PortFilePath(), "--data-dir", options_.data_dir,
               // A fixed --port would leave HTTP on its fixed default: parallel
               // tests would collide there.
               "--http-port", "-1"});
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  const std::string log = log_path();
  // Built before fork: the child only execs.
  std::vector<std::string> env = options_.extra_env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // Appends, so the log keeps every incarnation.
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDERR_FILENO);
      dup2(fd, STDOUT_FILENO);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  pid_ = pid;
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      std::string text = ReadFile(log);
      if (text.size() > kLogTailBytes) {
        text = text.substr(text.size() - kLogTailBytes);
      }
      return absl::UnavailableError(
          absl::StrCat("coordinator exited during start (status ", status, "); log: ", text));
    }
    int port = 0;
    const std::string content = ReadFile(PortFilePath());
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(content), &port) && port > 0) {
      port_ = port;
      return absl::OkStatus();
    }
    absl::SleepFor(kPollInterval);
  }
  Kill9();
  return absl::UnavailableError(absl::StrCat("coordinator wrote no port file within ",
                                             absl::FormatDuration(options_.start_timeout),
                                             "; log at ", log));
}

void CoordinatorProcess::Kill9() {
  if (!running()) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::optional<int> CoordinatorProcess::ExitedWith() {
  if (!running()) return std::nullopt;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int CoordinatorProcess::Terminate() {
  if (!running()) return -1;
  kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + options_.stop_timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    absl::SleepFor(kPollInterval);
  }
  Kill9();
  return -1;
}

}  // namespace ddp::testing
