#ifndef DDP_TOOLS_RDZV_SIM_COORDINATOR_CHILD_H_
#define DDP_TOOLS_RDZV_SIM_COORDINATOR_CHILD_H_

// A coordinator process started by the benchmark itself, so that its CPU and
// memory can be read from /proc: runs
//   BINARY --port 0 --port-file WORK/port --data-dir DATA --bind 127.0.0.1 ...
// with its output in WORK/coordinator.log, and waits for the port file.
//
// Possible errors (Start): FAILED_PRECONDITION the binary is not executable;
// INTERNAL fork failed; UNAVAILABLE the process exited or wrote no port file
// within start_timeout (the log path is in the message).
// Thread-safety: not thread-safe; one owner.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddp::rdzv_sim {

struct CoordinatorChildOptions {
  std::string binary;
  std::string data_dir;
  std::string work_dir;  // port file and log
  std::string bind = "127.0.0.1";
  std::vector<std::string> extra_args;
  absl::Duration start_timeout = absl::Seconds(30);
  absl::Duration stop_timeout = absl::Seconds(10);
  absl::Duration poll_interval = absl::Milliseconds(20);
};

class CoordinatorChild {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorChild>> Start(CoordinatorChildOptions options);
  // Stops the process (SIGTERM, then SIGKILL after stop_timeout).
  ~CoordinatorChild();
  CoordinatorChild(const CoordinatorChild&) = delete;
  CoordinatorChild& operator=(const CoordinatorChild&) = delete;

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  std::string target() const;  // "127.0.0.1:PORT"
  std::string log_path() const;

  // SIGTERM and reap; returns the exit status (-1 if killed or by a signal).
  int Stop();

 private:
  explicit CoordinatorChild(CoordinatorChildOptions options) : options_(std::move(options)) {}

  const CoordinatorChildOptions options_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace ddp::rdzv_sim

#endif  // DDP_TOOLS_RDZV_SIM_COORDINATOR_CHILD_H_
