#include "tools/continuity_bench/ack_timeline.h"

#include <algorithm>

namespace ddp::continuity_bench {

std::optional<absl::Duration> LongestGap(const std::vector<absl::Time>& acks, absl::Time from,
                                         absl::Time to) {
  // The first acknowledgement after `from`; the gap that ends there began
  // before `from` (or at the start of the list).
  auto it = std::upper_bound(acks.begin(), acks.end(), from);
  if (it == acks.end()) return std::nullopt;
  std::optional<absl::Duration> longest;
  for (; it != acks.end() && (it == acks.begin() || *(it - 1) <= to); ++it) {
    if (it == acks.begin()) continue;
    const absl::Duration gap = *it - *(it - 1);
    if (!longest || gap > *longest) longest = gap;
  }
  if (!longest) longest = absl::ZeroDuration();  // only an ack at the very start
  return longest;
}

std::optional<absl::Time> FirstAfter(const std::vector<absl::Time>& acks, absl::Time t) {
  auto it = std::upper_bound(acks.begin(), acks.end(), t);
  if (it == acks.end()) return std::nullopt;
  return *it;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double Max(const std::vector<double>& values) {
  return values.empty() ? 0 : *std::max_element(values.begin(), values.end());
}

}  // namespace ddp::continuity_bench
