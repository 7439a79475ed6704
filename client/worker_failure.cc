#include "client/worker_failure.h"

#include <signal.h>

#include "client/error_file.h"

namespace ddp::client {
namespace {

bool IsStopSignal(int signal) { return signal == SIGTERM || signal == SIGKILL; }

}  // namespace

absl::Time FailureTime(const WorkerExit& exit) {
  if (exit.kind == WorkerExit::Kind::kHung) {
    return exit.last_heartbeat != absl::Time() ? exit.last_heartbeat : exit.time;
  }
  if (!exit.error) return exit.time;
  const std::optional<ErrorTimestamp> stamp = ParseErrorTimestamp(exit.error->timestamp);
  if (!stamp || stamp->time > exit.time) return exit.time;
  if (stamp->whole_seconds && exit.time < stamp->time + absl::Seconds(1)) {
    return exit.time;
  }
  return stamp->time;
}

bool CausedByStop(const WorkerExit& exit) {
  if (!exit.during_stop) return false;
  switch (exit.kind) {
    case WorkerExit::Kind::kSignaled:
      return IsStopSignal(exit.signal);
    case WorkerExit::Kind::kExited:
      return exit.exit_code > 128 && IsStopSignal(exit.exit_code - 128);
    case WorkerExit::Kind::kHung:
      return false;
  }
  return false;
}

WorkerFailure ToWorkerFailure(const WorkerExit& exit, const std::string& node) {
  WorkerFailure f;
  f.node = node;
  f.global_rank = exit.global_rank;
  f.local_rank = exit.local_rank;
  f.pid = exit.pid > 0 ? exit.pid : 0;
  f.time = FailureTime(exit);
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
      f.idle = exit.hang_signal == WorkerExit::HangSignal::kIdle;
      f.knock_on_of_rank = exit.knock_on_of_rank;
      break;
  }
  if (exit.error) {
    f.message = exit.error->message;
    f.traceback = exit.error->traceback;
    f.error_file = exit.error_file;
  }
  if (f.traceback.empty()) f.traceback = exit.stderr_traceback;
  f.stderr_tail = exit.stderr_tail;
  f.log_path = exit.stderr_log;
  return f;
}

}  // namespace ddp::client
