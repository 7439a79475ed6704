#ifndef DDP_TOOLS_KV_BENCH_PROCESS_CPU_H_
#define DDP_TOOLS_KV_BENCH_PROCESS_CPU_H_

// CPU time (user + system) of a process, from /proc/PID/stat (Linux). kv_bench
// reads it for itself and for the server under test around each measured
// window, to report the CPU cost of one operation on each side.
//
// Possible errors: NOT_FOUND (no /proc/PID/stat), INVALID_ARGUMENT (the text
// is not a stat line; the message quotes it, size-capped).
// Thread-safety: pure functions.

#include <sys/types.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ddp::kv_bench {

// utime + stime of a /proc/PID/stat line: fields 14 and 15, counted after the
// parenthesised command name (which may itself hold spaces and parentheses).
absl::StatusOr<absl::Duration> ParseStatCpuTime(absl::string_view stat, int64_t ticks_per_second);

// CPU time of `pid` so far; pid 0 means this process.
absl::StatusOr<absl::Duration> ReadProcessCpuTime(pid_t pid);

}  // namespace ddp::kv_bench

#endif  // DDP_TOOLS_KV_BENCH_PROCESS_CPU_H_
