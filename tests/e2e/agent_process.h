#ifndef DDP_TESTS_E2E_AGENT_PROCESS_H_
#define DDP_TESTS_E2E_AGENT_PROCESS_H_

// One real ddp-client process for end-to-end tests: forked and exec'd with
// its stdout and stderr in a log file, in a process group of its own, with
// extra environment variables. Waits poll (waitpid WNOHANG) under a bound.
//
// Thread-safety: not thread-safe; the test thread drives it.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ddp::testing {

struct AgentProcessOptions {
  std::string binary;  // The ddp-client executable.
  std::vector<std::string> args;
  std::string log_path;          // Truncated, then gets stdout + stderr.
  std::vector<std::string> env;  // "NAME=VALUE", added to the test's.
};

// $TEST_SRCDIR/$TEST_WORKSPACE/<relative>: a file of a test's runfiles.
std::string Runfile(const std::string& relative);

// Reads a whole file; empty when it does not exist.
std::string ReadWholeFile(const std::string& path);

// Runs `command` through /bin/sh; its exit code (-1 when killed by a signal)
// and its stdout and stderr together.
struct ShellResult {
  int exit_code = -1;
  std::string output;
};
ShellResult RunShell(const std::string& command);

// The command line of one ddp-client in an end-to-end test, after the binary:
// the flags that many tests give, by name, then `flags` (what is particular to
// the test), then --no-python when asked, then the entry point and its
// arguments. A named flag left empty or unset is left out, so ddp-client's
// default applies.
struct AgentArgsOptions {
  std::string coordinator;  // --coordinator HOST:PORT, always given
  std::string job;          // --job, always given
  std::string node_id;      // --node-id, always given
  std::string local_addr;   // --local-addr
  std::string log_dir;      // --log-dir
  std::string rdzv_conf;    // --rdzv-conf KEY=VALUE,...
  std::string nnodes;       // --nnodes N or MIN:MAX
  std::optional<int> nproc_per_node;
  std::optional<int> max_restarts;
  std::optional<int> connect_timeout_s;   // --connect-timeout SECONDS
  std::optional<int> shutdown_timeout_s;  // --shutdown-timeout SECONDS
  std::vector<std::string> flags;         // further flags, in this order
  bool no_python = false;                 // --no-python: the entry point is a program
  std::vector<std::string> entrypoint;    // the script or program, then its arguments
};
std::vector<std::string> AgentArgs(const AgentArgsOptions& options);

class AgentProcess {
 public:
  // Starts the process at once; pid() is -1 if fork failed.
  explicit AgentProcess(AgentProcessOptions options);
  // SIGKILL to the process group, then reaped, if it still runs.
  ~AgentProcess();
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  // The exit code (128+N for signal N), or -1 if it still runs after `bound`.
  int Wait(absl::Duration bound);
  // kill(pid, signal); false if it is no longer running.
  bool Signal(int signal);
  // SIGKILL to the process alone (not its group), then reaped.
  void Kill9();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // Everything it has printed so far.
  std::string log() const { return ReadWholeFile(options_.log_path); }

 private:
  AgentProcessOptions options_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

}  // namespace ddp::testing

#endif  // DDP_TESTS_E2E_AGENT_PROCESS_H_
