#ifndef DDP_CLIENT_ROOT_CAUSE_H_
#define DDP_CLIENT_ROOT_CAUSE_H_

// The failure summary an agent prints when a job fails, in torchrun's layout
// (ChildFailedError): every failure, and the first one by time as the root
// cause.
//
//   ============================================================
//   train.py FAILED
//   ------------------------------------------------------------
//   Failures:
//   [1]:
//     time      : 2026-11-23_01:02:03
//     host      : node-b
//     rank      : 3 (local_rank: 1)
//     exitcode  : -9 (pid: 4242)
//     error_file: <N/A>
//     traceback : Signal 9 (SIGKILL) received by PID 4242
//   ------------------------------------------------------------
//   Root Cause (first observed failure):
//   [0]:
//     ...
//   ============================================================
//
// Thread-safety: pure functions.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ddp::client {

struct WorkerFailure {
  enum class Kind { kExitCode, kSignal, kHang };
  std::string node;
  int global_rank = 0;
  int local_rank = 0;
  pid_t pid = 0;
  Kind kind = Kind::kExitCode;
  int exit_code = 0;          // kExitCode
  int signal = 0;             // kSignal
  absl::Duration silent_for;  // kHang
  std::string message;        // error file message, may be empty
  std::string traceback;      // error file traceback, may be empty
  std::string error_file;     // path, empty when none was written
  absl::Time time;
};

// Index of the earliest failure (the root cause); ties go to the lower global
// rank. -1 when `failures` is empty.
int RootCauseIndex(const std::vector<WorkerFailure>& failures);

// "node-b rank 3 (local_rank 1): signal SIGKILL: <message>" — for logs and
// status lines.
std::string OneLineFailure(const WorkerFailure& failure);

// The full torchrun-style summary. `title` is usually the entry point
// ("train.py").
std::string FormatFailureSummary(const std::string& title,
                                 const std::vector<WorkerFailure>& failures);

}  // namespace ddp::client

#endif  // DDP_CLIENT_ROOT_CAUSE_H_
