#ifndef DDP_TESTS_CRASH_COORDINATOR_PROCESS_H_
#define DDP_TESTS_CRASH_COORDINATOR_PROCESS_H_

// A real //coordinator:coordinator process for integration tests and tools:
// started with --port 0 --port-file on a given data dir, stopped with SIGTERM
// or killed with SIGKILL (kill -9) and restarted on the same dir.
//
// Possible errors: Start returns UNAVAILABLE if the process exits or writes no
// port file within `start_timeout` (its log tail is in the message),
// FAILED_PRECONDITION if it is already running, INTERNAL if fork fails.
// Thread-safety: not thread-safe; one owner thread drives it.

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ddp::testing {

struct CoordinatorProcessOptions {
  std::string binary;    // Path of the coordinator binary.
  std::string data_dir;  // --data-dir; reused across restarts.
  std::string work_dir;  // Port file and log live here.
  std::vector<std::string> extra_args;
  // Run as PREFIX... BINARY ARGS (e.g. {"/usr/sbin/ip", "netns", "exec", NS}:
  // `ip netns exec` execs the binary, so the pid is the coordinator's).
  std::vector<std::string> command_prefix;
  // --bind, and the host of address().
  std::string host = "127.0.0.1";
  // "NAME=value" entries added to the inherited environment (e.g. LD_PRELOAD
  // of a fault injector).
  std::vector<std::string> extra_env;
  // Restart on the port the first start got (clients keep their address).
  bool keep_port_across_restarts = true;
  absl::Duration start_timeout = absl::Seconds(20);
  absl::Duration stop_timeout = absl::Seconds(20);
};

// The coordinator binary inside a Bazel test's runfiles
// ($TEST_SRCDIR/ddp_coordinator/coordinator/coordinator).
std::string CoordinatorBinaryFromRunfiles();

class CoordinatorProcess {
 public:
  explicit CoordinatorProcess(CoordinatorProcessOptions options);
  ~CoordinatorProcess();  // Kills the process if it still runs.
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  // Starts the process and waits for its port file. The port may differ
  // between restarts.
  absl::Status Start();
  // SIGKILL and reap. No-op if not running.
  void Kill9();
  // SIGTERM and wait for exit; returns the exit code (-1 if it had to be
  // killed after stop_timeout or died by a signal).
  int Terminate();
  // Without waiting: the exit code if the process ended on its own (reaped
  // now; -1 for a signal), nullopt while it runs (or was never started).
  std::optional<int> ExitedWith();

  // The binary the next Start runs (a rolling upgrade: stop, replace, start).
  void set_binary(const std::string& binary) { options_.binary = binary; }
  // The environment entries the next Start adds (e.g. DDP_FAILPOINTS).
  void set_extra_env(std::vector<std::string> env) { options_.extra_env = std::move(env); }

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }  // -1 when not running
  int port() const { return port_; }
  std::string address() const;  // "HOST:PORT".
  std::string log_path() const;

 private:
  std::string PortFilePath() const;

  CoordinatorProcessOptions options_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace ddp::testing

#endif  // DDP_TESTS_CRASH_COORDINATOR_PROCESS_H_
