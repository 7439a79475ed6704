#ifndef DDP_CLIENT_ROOT_CAUSE_H_
#define DDP_CLIENT_ROOT_CAUSE_H_

// The failure summary an agent prints when a job fails, in torchrun's layout
// (ChildFailedError): every failure, earliest first, and the root cause (the
// coordinator's choice, or the earliest failure) apart.
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
// "(pid: N)" only where the pid is known. Where torchrun prints its docs link
// ("To enable traceback see: ...") the worker's own words stand: the last
// lines of its stderr, and a "logs      : node:path" line names its whole
// stderr. A hang shows as
// "exitcode  : hang: no heartbeat for 5.0 s" (or "hang" when the duration
// came from another node), never as an exit code.
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
  pid_t pid = 0;  // 0: unknown
  Kind kind = Kind::kExitCode;
  int exit_code = 0;          // kExitCode
  int signal = 0;             // kSignal
  absl::Duration silent_for;  // kHang; zero when unknown
  // kHang of a worker that never touched DDP_HEARTBEAT_FILE: found by its
  // process group's CPU and I/O (activity_tracker.h), silent_for idle.
  bool idle = false;
  int knock_on_of_rank = -1;  // kHang: blocked behind this rank's hang
  std::string message;        // error file message, may be empty
  std::string traceback;      // error file traceback, else stderr's; may be empty
  std::string error_file;     // path, empty when none was written
  std::string stderr_tail;    // the last lines of its stderr, may be empty
  std::string log_path;       // its whole stderr on `node`; empty: none
  absl::Time time;            // when it failed (worker_failure.h FailureTime)
};

// Index of the root cause: the earliest failure, ties to the lower global
// rank, knock-on hangs only when nothing else failed. -1 when `failures` is
// empty.
int RootCauseIndex(const std::vector<WorkerFailure>& failures);

// "node-b rank 3 (local_rank 1): signal SIGKILL: <message>" — for logs and
// status lines.
std::string OneLineFailure(const WorkerFailure& failure);

// The full torchrun-style summary. `title` is usually the entry point
// ("train.py"); failures[root] is the root cause (RootCauseIndex when `root`
// is negative or out of range), the others are listed by time.
std::string FormatFailureSummary(const std::string& title,
                                 const std::vector<WorkerFailure>& failures, int root = -1);

}  // namespace ddp::client

#endif  // DDP_CLIENT_ROOT_CAUSE_H_
