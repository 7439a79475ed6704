#ifndef DDP_CLIENT_RECOVERY_CHANNEL_H_
#define DDP_CLIENT_RECOVERY_CHANNEL_H_

// The agent's side of an in-process restart (ddp-client --in-process-restart)
// with one worker slot: the files through which the agent and a worker that
// runs its training loop under ddp_coordinator.run
// (python/ddp_coordinator/recovery.py) agree that the worker survives a
// failure of another rank. The worker finds the folder in DDP_RECOVERY_DIR
// (one per local rank, the same for every generation).
//
//   DIR/control  a FIFO, agent -> worker, one JSON object per line:
//                  {"op":"abandon","generation":G}   leave generation G's
//                      process group now and wait (a peer failed)
//                  {"op":"join","generation":G,"env":{"RANK":"3",...}}
//                      take part in generation G with these variables (those
//                      of ChangesEveryGeneration)
//   DIR/state    worker -> agent, one line written atomically (rename):
//                  "running G PID"  in generation G under the wrapper
//                  "parked G PID"   left generation G, waits for a join
//
// Life of a slot:
//
//   worker starts --run()--> running G --abandon G--> parked G --join G'-->
//   running G' ...   (a worker that is not "running G" with its own pid when
//   the stop comes, or not "parked G" by the deadline, is stopped as today)
//
// Thread-safety: a RecoveryChannel is a value; its methods touch only the
// files (any thread, one writer at a time).

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/worker_env.h"

namespace ddp::client {

// What the worker last said about itself (DIR/state).
struct RecoveryReport {
  enum class State { kRunning, kParked };
  State state = State::kRunning;
  int64_t generation = 0;
  pid_t pid = -1;
};

// Parses a state line ("running 4 1234\n"). Possible errors: INVALID_ARGUMENT
// (anything else, the text quoted, capped).
absl::StatusOr<RecoveryReport> ParseRecoveryReport(const std::string& text);

// The control lines (each ends with '\n').
std::string AbandonMessage(int64_t generation);
// `env`: the worker's complete environment for the generation; only the
// variables of ChangesEveryGeneration (worker_env.h) travel.
std::string JoinMessage(int64_t generation, const EnvMap& env);

class RecoveryChannel {
 public:
  // Creates `dir` and its FIFO (kept when present: a surviving worker holds
  // it open). Possible errors: INTERNAL (mkdir/mkfifo, path and errno named).
  static absl::StatusOr<RecoveryChannel> Open(std::string dir);

  const std::string& dir() const { return dir_; }

  // Forgets what the slot's previous worker said (before a new one starts).
  void Reset() const;

  // The worker's last report; nullopt when none (or unreadable: logged).
  std::optional<RecoveryReport> Read() const;

  // Writes one control line. Possible errors: FAILED_PRECONDITION (no worker
  // holds the FIFO open: it does not run under the wrapper), UNAVAILABLE
  // (the FIFO is full: the worker does not read it), INTERNAL (other errors).
  absl::Status Send(const std::string& line) const;

 private:
  explicit RecoveryChannel(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_RECOVERY_CHANNEL_H_
