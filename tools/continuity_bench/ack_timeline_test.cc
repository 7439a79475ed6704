#include "tools/continuity_bench/ack_timeline.h"

#include "gtest/gtest.h"

namespace ddp::continuity_bench {
namespace {

absl::Time T(double seconds) { return absl::UnixEpoch() + absl::Seconds(seconds); }

TEST(LongestGapTest, GapAroundTheEvent_Counted) {
  const std::vector<absl::Time> acks = {T(0), T(1), T(1.5), T(6.5), T(6.6), T(20)};
  // The gap 1.5 -> 6.5 spans the event at 2; 6.6 -> 20 begins after `to`.
  EXPECT_EQ(LongestGap(acks, T(2), T(6.55)), absl::Seconds(5));
  // ... and counts once it begins before `to`; 0 -> 1 ended before `from`.
  EXPECT_EQ(LongestGap(acks, T(2), T(10)), absl::Seconds(13.4));
}

TEST(LongestGapTest, NothingAfterTheEvent_Nullopt) {
  EXPECT_FALSE(LongestGap({T(0), T(1)}, T(2), T(10)).has_value());
  EXPECT_FALSE(LongestGap({}, T(2), T(10)).has_value());
}

TEST(LongestGapTest, FirstAckAfterTheEvent_GapFromNothing_Zero) {
  EXPECT_EQ(LongestGap({T(3)}, T(2), T(10)), absl::ZeroDuration());
}

TEST(FirstAfterTest, FindsTheNext) {
  EXPECT_EQ(FirstAfter({T(0), T(1), T(5)}, T(1)), T(5));
  EXPECT_FALSE(FirstAfter({T(0)}, T(1)).has_value());
}

TEST(MedianMaxTest, OddEvenEmpty) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 3);
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Max({1, 7, 3}), 7);
  EXPECT_EQ(Max({}), 0);
}

}  // namespace
}  // namespace ddp::continuity_bench
