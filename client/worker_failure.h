#ifndef DDP_CLIENT_WORKER_FAILURE_H_
#define DDP_CLIENT_WORKER_FAILURE_H_

// Converts a supervisor event into the failure record of root_cause.h, and
// says when a failure happened (the time the coordinator orders failures by).
// Thread-safety: pure functions.

#include <string>

#include "absl/time/time.h"
#include "client/root_cause.h"
#include "client/worker_supervisor.h"

namespace ddp::client {

// When the worker failed, as well as this node can tell:
//   - a hang: its last heartbeat (its peers, blocked behind it, went silent
//     later);
//   - a worker that wrote TORCHELASTIC_ERROR_FILE with a timestamp: that
//     timestamp (as torchrun orders failures), except that a whole-second
//     stamp is refined by the exit time when the exit fell in that very
//     second (the error happened in [stamp, exit]); a stamp later than the
//     exit is not believed;
//   - otherwise the moment its exit was seen.
absl::Time FailureTime(const WorkerExit& exit);

// An exit that the agent's own stop caused (SIGTERM/SIGKILL, or the shell's
// 128+N for them, after the stop began): no failure of the worker.
bool CausedByStop(const WorkerExit& exit);

WorkerFailure ToWorkerFailure(const WorkerExit& exit, const std::string& node);

}  // namespace ddp::client

#endif  // DDP_CLIENT_WORKER_FAILURE_H_
