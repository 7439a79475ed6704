#include "tools/rdzv_sim/latency_stats.h"

#include "gtest/gtest.h"

namespace ddp::rdzv_sim {
namespace {

std::vector<absl::Duration> Millis(int from, int to) {
  std::vector<absl::Duration> out;
  for (int i = to; i >= from; --i) out.push_back(absl::Milliseconds(i));
  return out;
}

TEST(LatencyStats, Summarize_OneToHundred_NearestRankPercentiles) {
  LatencySummary s = Summarize(Millis(1, 100));
  EXPECT_EQ(s.count, 100);
  EXPECT_EQ(s.min, absl::Milliseconds(1));
  EXPECT_EQ(s.p50, absl::Milliseconds(50));
  EXPECT_EQ(s.p90, absl::Milliseconds(90));
  EXPECT_EQ(s.p99, absl::Milliseconds(99));
  EXPECT_EQ(s.max, absl::Milliseconds(100));
  EXPECT_EQ(s.mean, absl::Microseconds(50500));
}

TEST(LatencyStats, Summarize_Empty_AllZero) {
  LatencySummary s = Summarize({});
  EXPECT_EQ(s.count, 0);
  EXPECT_EQ(s.max, absl::ZeroDuration());
}

TEST(LatencyStats, NearestRank_SingleSample_ReturnsIt) {
  EXPECT_EQ(NearestRank({absl::Seconds(2)}, 99), absl::Seconds(2));
  EXPECT_EQ(NearestRank({absl::Seconds(1), absl::Seconds(2)}, 50), absl::Seconds(1));
  EXPECT_EQ(NearestRank({absl::Seconds(1), absl::Seconds(2)}, 51), absl::Seconds(2));
}

}  // namespace
}  // namespace ddp::rdzv_sim
