#include "tests/e2e/agent_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ddp::testing {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

int ExitCode(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::string Runfile(const std::string& relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "ddp_coordinator", "/", relative);
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> AgentArgs(const AgentArgsOptions& options) {
  std::vector<std::string> args = {"--coordinator", options.coordinator, "--job",
                                   options.job,     "--node-id",         options.node_id};
  auto add = [&args](const char* flag, const std::string& value) {
    if (value.empty()) return;
    args.push_back(flag);
    args.push_back(value);
  };
  auto add_number = [&add](const char* flag, const std::optional<int>& value) {
    if (value.has_value()) add(flag, absl::StrCat(*value));
  };
  add("--local-addr", options.local_addr);
  add("--log-dir", options.log_dir);
  add("--rdzv-conf", options.rdzv_conf);
  add("--nnodes", options.nnodes);
  add_number("--nproc-per-node", options.nproc_per_node);
  add_number("--max-restarts", options.max_restarts);
  add_number("--connect-timeout", options.connect_timeout_s);
  add_number("--shutdown-timeout", options.shutdown_timeout_s);
  args.insert(args.end(), options.flags.begin(), options.flags.end());
  if (options.no_python) args.push_back("--no-python");
  args.insert(args.end(), options.entrypoint.begin(), options.entrypoint.end());
  return args;
}

AgentProcess::AgentProcess(AgentProcessOptions options) : options_(std::move(options)) {
  std::vector<std::string> argv = {options_.binary};
  argv.insert(argv.end(), options_.args.begin(), options_.args.end());
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int fd = open(options_.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    for (const std::string& kv : options_.env) putenv(strdup(kv.c_str()));
    std::vector<char*> raw;
    for (std::string& arg : argv) raw.push_back(arg.data());
    raw.push_back(nullptr);
    execv(raw[0], raw.data());
    _exit(127);
  }
  if (pid > 0) setpgid(pid, pid);  // Either side may win; both set the same.
  pid_ = pid;
}

AgentProcess::~AgentProcess() {
  if (!running()) return;
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
}

int AgentProcess::Wait(absl::Duration bound) {
  if (!running()) return exit_code_;
  const absl::Time deadline = absl::Now() + bound;
  while (true) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_code_ = ExitCode(status);
      return exit_code_;
    }
    if (absl::Now() >= deadline) return -1;
    absl::SleepFor(kPollInterval);
  }
}

bool AgentProcess::Signal(int signal) { return running() && kill(pid_, signal) == 0; }

void AgentProcess::Kill9() {
  if (!running()) return;
  kill(pid_, SIGKILL);
  int status = 0;
  if (waitpid(pid_, &status, 0) == pid_) exit_code_ = ExitCode(status);
  pid_ = -1;
}

ShellResult RunShell(const std::string& command) {
  ShellResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace ddp::testing
