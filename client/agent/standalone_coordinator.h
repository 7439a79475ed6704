#ifndef DDP_CLIENT_AGENT_STANDALONE_COORDINATOR_H_
#define DDP_CLIENT_AGENT_STANDALONE_COORDINATOR_H_

// The coordinator a ddp-client serves itself (--standalone, and torchrun's
// c10d form or launch's static form on the endpoint's host): a child process
// of the agent running ddp-client's own executable with --serve-coordinator
// (coordinator/coordinator_command.h is linked into ddp-client), so a
// ddp-client copied alone to a node needs no other binary:
//
//   ddp-client --serve-coordinator --port 0 --bind 127.0.0.1
//              --port_file TMP/port --data_dir TMP/data --http_port 0
//              [--log_level LEVEL]
//
// where TMP is a fresh directory under $TMPDIR (default /tmp). A child rather
// than a thread: the coordinator keeps its own signals, descriptors and log
// file, and its exit code (4: the port is taken) says what went wrong. Start
// waits for the port file, so address() is ready to dial. The child gets
// PR_SET_PDEATHSIG(SIGTERM) (it dies with the agent) and its own process
// group. Stop: SIGTERM, SIGKILL after stop_timeout, reaped, TMP removed.
//
// Thread-safety: Start/Stop from one thread.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddp::client {

struct StandaloneCoordinatorOptions {
  // The program and leading arguments that serve a coordinator (its flags
  // follow); empty: DefaultServeCommand(), this executable with
  // --serve-coordinator. Tests name another program.
  std::vector<std::string> command;
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

// The first argument that makes ddp-client run the coordinator command
// instead of the agent (client/ddp_client/main.cc).
inline constexpr char kServeCoordinatorArg[] = "--serve-coordinator";

// {this process's executable, kServeCoordinatorArg}: what ddp-client runs to
// serve a coordinator. Possible errors: INTERNAL (/proc/self/exe unreadable).
absl::StatusOr<std::vector<std::string>> DefaultServeCommand();

class StandaloneCoordinator {
 public:
  // Possible errors: INTERNAL (no executable, temp dir, fork),
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
