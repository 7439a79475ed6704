#ifndef DDP_TOOLS_CONTINUITY_BENCH_ACK_TIMELINE_H_
#define DDP_TOOLS_CONTINUITY_BENCH_ACK_TIMELINE_H_

// The write outage of the continuity benchmark, from the times at which a
// writer's puts were acknowledged (in order): the longest gap between two
// consecutive acknowledgements around an event, and the first one after it.
// Plus the median and max the summaries print.
//
// Thread-safety: pure functions.

#include <optional>
#include <vector>

#include "absl/time/time.h"

namespace ddp::continuity_bench {

// The longest gap between consecutive acknowledgements (sorted `acks`) among
// the pairs whose gap overlaps [from, to]: the pair around `from` counts.
// nullopt when no acknowledgement came after `from`.
std::optional<absl::Duration> LongestGap(const std::vector<absl::Time>& acks, absl::Time from,
                                         absl::Time to);

// The first acknowledgement after `t` (sorted `acks`); nullopt when none.
std::optional<absl::Time> FirstAfter(const std::vector<absl::Time>& acks, absl::Time t);

// Median (the upper one of an even count) and maximum; 0 for an empty list.
double Median(std::vector<double> values);
double Max(const std::vector<double>& values);

}  // namespace ddp::continuity_bench

#endif  // DDP_TOOLS_CONTINUITY_BENCH_ACK_TIMELINE_H_
