#include "client/worker_failure.h"

namespace ddp::client {

WorkerFailure ToWorkerFailure(const WorkerExit& exit, const std::string& node) {
  WorkerFailure f;
  f.node = node;
  f.global_rank = exit.global_rank;
  f.local_rank = exit.local_rank;
  f.pid = exit.pid;
  f.time = exit.time;
  switch (exit.kind) {
    case WorkerExit::Kind::kExited:
      f.kind = WorkerFailure::Kind::kExitCode;
      f.exit_code = exit.exit_code;
      break;
    case WorkerExit::Kind::kSignaled:
      f.kind = WorkerFailure::Kind::kSignal;
      f.signal = exit.signal;
      break;
    case WorkerExit::Kind::kHung:
      f.kind = WorkerFailure::Kind::kHang;
      f.silent_for = exit.silent_for;
      break;
  }
  if (exit.error) {
    f.message = exit.error->message;
    f.traceback = exit.error->traceback;
    f.error_file = exit.error_file;
  }
  return f;
}

}  // namespace ddp::client
