#include "client/heartbeat_tracker.h"

#include "common/clock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

const absl::Time kMtime = absl::FromUnixSeconds(1000);

TEST(HeartbeatTrackerTest, Observe_NeverTouched_NeverHung) {
  FakeClock clock;
  HeartbeatTracker tracker(absl::Seconds(10));
  EXPECT_FALSE(tracker.Observe(std::nullopt, clock.Now()));
  clock.Advance(absl::Hours(5));
  EXPECT_FALSE(tracker.Observe(std::nullopt, clock.Now()));
  EXPECT_FALSE(tracker.touched());
}

TEST(HeartbeatTrackerTest, Observe_SilentPastTimeout_Hung) {
  FakeClock clock;
  HeartbeatTracker tracker(absl::Seconds(10));
  EXPECT_FALSE(tracker.Observe(kMtime, clock.Now()));
  clock.Advance(absl::Seconds(10));
  EXPECT_FALSE(tracker.Observe(kMtime, clock.Now()));  // exactly the timeout: not yet
  clock.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(tracker.Observe(kMtime, clock.Now()));
  EXPECT_EQ(tracker.SilentFor(clock.Now()), absl::Seconds(10) + absl::Milliseconds(1));
}

TEST(HeartbeatTrackerTest, Observe_NewMtime_ResetsTheTimer) {
  FakeClock clock;
  HeartbeatTracker tracker(absl::Seconds(10));
  tracker.Observe(kMtime, clock.Now());
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(tracker.Observe(kMtime + absl::Seconds(1), clock.Now()));
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(tracker.Observe(kMtime + absl::Seconds(1), clock.Now()));
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE(tracker.Observe(kMtime + absl::Seconds(1), clock.Now()));
}

TEST(HeartbeatTrackerTest, Observe_FileDeletedAfterTouch_StillCounted) {
  FakeClock clock;
  HeartbeatTracker tracker(absl::Seconds(1));
  tracker.Observe(kMtime, clock.Now());
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE(tracker.Observe(std::nullopt, clock.Now()));
}

TEST(HeartbeatTrackerTest, Observe_ZeroTimeout_Disabled) {
  FakeClock clock;
  HeartbeatTracker tracker(absl::ZeroDuration());
  tracker.Observe(kMtime, clock.Now());
  clock.Advance(absl::Hours(1));
  EXPECT_FALSE(tracker.Observe(kMtime, clock.Now()));
}

TEST(HeartbeatTrackerTest, Forgive_FrozenTime_NotCountedAsSilence) {
  FakeClock clock;
  HeartbeatTracker tracker(absl::Seconds(10));
  tracker.Observe(kMtime, clock.Now());
  clock.Advance(absl::Seconds(4));
  // Frozen by the agent for 30 s, then thawed: 4 s of its own silence count.
  clock.Advance(absl::Seconds(30));
  tracker.Forgive(absl::Seconds(30));
  EXPECT_FALSE(tracker.Observe(kMtime, clock.Now()));
  EXPECT_EQ(tracker.SilentFor(clock.Now()), absl::Seconds(4));
  clock.Advance(absl::Seconds(6) + absl::Milliseconds(1));
  EXPECT_TRUE(tracker.Observe(kMtime, clock.Now()));
}

TEST(HeartbeatTrackerTest, Forgive_NeverTouched_StaysUntouched) {
  HeartbeatTracker tracker(absl::Seconds(10));
  tracker.Forgive(absl::Seconds(30));
  EXPECT_FALSE(tracker.touched());
}

TEST(DescribeSilenceTest, OneDecimalInSeconds) {
  EXPECT_EQ(DescribeSilence(absl::Milliseconds(5049)), "no heartbeat for 5.0 s");
  EXPECT_EQ(DescribeSilence(absl::Seconds(30)), "no heartbeat for 30.0 s");
}

TEST(HeartbeatTrackerTest, LastTouchAndMtime_SetByFirstTouchOnly) {
  FakeClock clock;
  HeartbeatTracker tracker(absl::Seconds(10));
  EXPECT_FALSE(tracker.last_touch().has_value());
  EXPECT_FALSE(tracker.last_mtime().has_value());
  tracker.Observe(kMtime, clock.Now());
  const absl::Time seen = clock.Now();
  clock.Advance(absl::Seconds(1));
  tracker.Observe(kMtime, clock.Now());  // unchanged: no new touch
  EXPECT_EQ(tracker.last_touch(), seen);
  EXPECT_EQ(tracker.last_mtime(), kMtime);
}

}  // namespace
}  // namespace ddp::client
