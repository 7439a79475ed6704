#include "tools/rdzv_sim/latency_stats.h"

#include <algorithm>
#include <cmath>

namespace ddp::rdzv_sim {

absl::Duration NearestRank(const std::vector<absl::Duration>& sorted, double p) {
  const double n = static_cast<double>(sorted.size());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * n));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

LatencySummary Summarize(std::vector<absl::Duration> samples) {
  LatencySummary summary;
  if (samples.empty()) return summary;
  std::sort(samples.begin(), samples.end());
  absl::Duration total;
  for (absl::Duration d : samples) total += d;
  summary.count = static_cast<int>(samples.size());
  summary.min = samples.front();
  summary.p50 = NearestRank(samples, 50);
  summary.p90 = NearestRank(samples, 90);
  summary.p99 = NearestRank(samples, 99);
  summary.max = samples.back();
  summary.mean = total / summary.count;
  return summary;
}

}  // namespace ddp::rdzv_sim
