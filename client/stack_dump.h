#ifndef DDP_CLIENT_STACK_DUMP_H_
#define DDP_CLIENT_STACK_DUMP_H_

// The Python stack of every thread of a running worker, taken without
// stopping it for more than a moment.
//
// How: the agent's sitecustomize.py (client/prewarm/sitecustomize.py, first on
// every Python worker's PYTHONPATH) registers
//   faulthandler.register(SIGUSR2, file=<DDP_STACK_DUMP_FILE>,
//                         all_threads=True, chain=False)
// after writing the line "ddp-stack-dump pid=<pid> signal=<n>" at the top of
// that file. faulthandler's handler is C code that reads the threads' frames
// without the GIL, so a thread blocked in a collective (gloo, NCCL) or in
// time.sleep is shown too; the interrupted system call is restarted
// (SA_RESTART). CollectStackDumps signals every target that wrote the line,
// then reads what each appended to its file.
//
// A worker is never signalled unless it registered (SIGUSR2's default action
// would kill it): no line, a line of another process (not the worker, one of
// its descendants, nor in the group it leads), or a process that is stopped
// (state T) gives a status
// instead of a stack.
//
// Thread-safety: pure functions over the file system and /proc; safe from
// any thread.

#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ddp::client {

// Documented in docs/worker-contract.md; torch and torchrun leave it alone.
inline constexpr int kStackDumpSignal = SIGUSR2;

struct StackDumpTarget {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;         // the worker
  std::string dump_file;  // its DDP_STACK_DUMP_FILE
};

struct StackDump {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;  // the process that was signalled
  // OK: `text` is faulthandler's dump. FAILED_PRECONDITION: not registered or
  // stopped (reason named); NOT_FOUND: the process is gone;
  // DEADLINE_EXCEEDED: it wrote nothing within the timeout (its handler was
  // replaced by the script's own, or it is blocked in a way that keeps signal
  // handlers from running).
  absl::Status status;
  std::string text;
};

struct StackDumpOptions {
  // How long every target together has to write its dump.
  absl::Duration timeout = absl::Seconds(2);
  // A dump is complete once its file stopped growing for this long.
  absl::Duration settle = absl::Milliseconds(30);
  absl::Duration poll_interval = absl::Milliseconds(5);
  // Longer dumps are cut (at a line end) and say so.
  size_t max_bytes = 64 << 10;
};

// Signals every registered target at once, then waits (up to
// options.timeout) for each dump. One result per target, in order.
std::vector<StackDump> CollectStackDumps(const std::vector<StackDumpTarget>& targets,
                                         const StackDumpOptions& options, const Clock& clock);

// The pid of the registration line at the top of `file_text` ("ddp-stack-dump
// pid=<pid> signal=<n>" with n == kStackDumpSignal); -1 when there is none.
pid_t RegisteredStackDumpPid(const std::string& file_text);

}  // namespace ddp::client

#endif  // DDP_CLIENT_STACK_DUMP_H_
