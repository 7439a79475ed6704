#ifndef DDP_CLIENT_WORKER_FAILURE_H_
#define DDP_CLIENT_WORKER_FAILURE_H_

// Converts a supervisor event into the failure record of root_cause.h.
// Thread-safety: pure function.

#include <string>

#include "client/root_cause.h"
#include "client/worker_supervisor.h"

namespace ddp::client {

WorkerFailure ToWorkerFailure(const WorkerExit& exit, const std::string& node);

}  // namespace ddp::client

#endif  // DDP_CLIENT_WORKER_FAILURE_H_
