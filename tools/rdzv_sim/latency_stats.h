#ifndef DDP_TOOLS_RDZV_SIM_LATENCY_STATS_H_
#define DDP_TOOLS_RDZV_SIM_LATENCY_STATS_H_

// Order statistics of a set of durations (nearest-rank percentiles).
// Thread-safety: pure functions.

#include <vector>

#include "absl/time/time.h"

namespace ddp::rdzv_sim {

struct LatencySummary {
  int count = 0;
  absl::Duration min;
  absl::Duration p50;
  absl::Duration p90;
  absl::Duration p99;
  absl::Duration max;
  absl::Duration mean;
};

// The nearest-rank percentile `p` (0 < p <= 100) of `sorted` (ascending,
// non-empty): the smallest sample with at least p% of samples <= it.
absl::Duration NearestRank(const std::vector<absl::Duration>& sorted, double p);

// All zero when `samples` is empty.
LatencySummary Summarize(std::vector<absl::Duration> samples);

}  // namespace ddp::rdzv_sim

#endif  // DDP_TOOLS_RDZV_SIM_LATENCY_STATS_H_
