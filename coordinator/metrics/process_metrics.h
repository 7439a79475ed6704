#ifndef DDP_COORDINATOR_METRICS_PROCESS_METRICS_H_
#define DDP_COORDINATOR_METRICS_PROCESS_METRICS_H_

// The Prometheus client libraries' process metrics (prometheus-cpp 1.0.1 has
// no process collector), read from /proc/self at scrape time:
//   process_cpu_seconds_total        user + system CPU time
//   process_resident_memory_bytes    resident set size
//   process_virtual_memory_bytes     virtual memory size
//   process_open_fds                 open file descriptors
//   process_max_fds                  the descriptor limit (RLIMIT_NOFILE, soft)
//   process_start_time_seconds       when the process started (Unix time)
//
// Possible errors: NOT_FOUND (a /proc file is missing: not Linux),
// INVALID_ARGUMENT (a /proc text without the expected fields).
// Thread-safety: pure functions (they read /proc afresh each call).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "prometheus/metric_family.h"

namespace ddp::metrics {

struct ProcessSnapshot {
  double cpu_seconds = 0;
  int64_t resident_bytes = 0;
  int64_t virtual_bytes = 0;
  int64_t open_fds = 0;
  int64_t max_fds = 0;
  double start_time_seconds = 0;
};

// From the texts of /proc/PID/stat and /proc/stat (for btime), with the
// clock ticks per second and the page size: everything but the descriptors.
absl::StatusOr<ProcessSnapshot> ParseProcessStat(absl::string_view stat,
                                                 absl::string_view system_stat,
                                                 int64_t ticks_per_second, int64_t page_bytes);

// This process, now.
absl::StatusOr<ProcessSnapshot> ReadSelfProcessSnapshot();

// The process_* families of `snapshot`.
std::vector<prometheus::MetricFamily> ProcessFamilies(const ProcessSnapshot& snapshot);

}  // namespace ddp::metrics

#endif  // DDP_COORDINATOR_METRICS_PROCESS_METRICS_H_
