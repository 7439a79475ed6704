#ifndef DDP_CLIENT_AGENT_STANDALONE_COORDINATOR_H_
#define DDP_CLIENT_AGENT_STANDALONE_COORDINATOR_H_

// --standalone: a private coordinator for a single-node job, run as a child
// process of the agent (the coordinator binary does not expose an embeddable
// session server yet):
//
//   coordinator --port 0 --bind 127.0.0.1 --port-file TMP/port
//               --data-dir TMP/data [--log-level LEVEL]
//
// where TMP is a fresh directory under $TMPDIR (default /tmp). Start waits for
// the port file, so address() is ready to dial. The child gets
// PR_SET_PDEATHSIG(SIGTERM) (it dies with the agent) and its own process
// group. Stop: SIGTERM, SIGKILL after stop_timeout, reaped, TMP removed.
//
// Thread-safety: Start/Stop from one thread.

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddp::client {

struct StandaloneCoordinatorOptions {
  // The coordinator executable; empty: FindCoordinatorBinary().
  std::string binary;
  // Where it listens. The defaults (loopback, any free port) are --standalone's;
  // torchrun's c10d form serves the job's --rdzv-endpoint port on every
  // interface.
  std::string bind = "127.0.0.1";
  int port = 0;
  // --log_level for the child ("debug", "info", "warning", "error"); empty:
  // the coordinator's default.
  std::string log_level;
  // The child's stdout and stderr go to this file (created, appended to);
  // empty: the agent's own.
  std::string log_file;
  absl::Duration start_timeout = absl::Seconds(15);
  absl::Duration stop_timeout = absl::Seconds(5);
};

// `coordinator` next to `self_exe` (an installed pair), then
// ../../coordinator/coordinator from it (the bazel-bin layout of
// //client/agent:ddp-client), then `coordinator` on PATH.
// Possible errors: NOT_FOUND (every place named).
absl::StatusOr<std::string> FindCoordinatorBinary(const std::string& self_exe);

class StandaloneCoordinator {
 public:
  // Possible errors: NOT_FOUND (no binary), INTERNAL (temp dir, fork),
  // ALREADY_EXISTS (the port is taken: another coordinator serves it),
  // UNAVAILABLE (the child exited or wrote no port within start_timeout; its
  // exit status named).
  static absl::StatusOr<std::unique_ptr<StandaloneCoordinator>> Start(
      const StandaloneCoordinatorOptions& options);
  ~StandaloneCoordinator();  // Stop()
  StandaloneCoordinator(const StandaloneCoordinator&) = delete;
  StandaloneCoordinator& operator=(const StandaloneCoordinator&) = delete;

  // "127.0.0.1:PORT" (the loopback address of the bound port).
  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  // Idempotent.
  void Stop();

 private:
  StandaloneCoordinator(StandaloneCoordinatorOptions options, std::string dir, pid_t pid)
      : options_(std::move(options)), dir_(std::move(dir)), pid_(pid) {}

  const StandaloneCoordinatorOptions options_;
  const std::string dir_;
  pid_t pid_;
  std::string address_;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_STANDALONE_COORDINATOR_H_
