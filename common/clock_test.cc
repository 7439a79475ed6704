#include "common/clock.h"

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(FakeClockTest, Advance_MovesNowByExactlyThatMuch) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  clock.Advance(absl::Milliseconds(1500));
  EXPECT_EQ(clock.Now() - start, absl::Milliseconds(1500));
}

TEST(FakeClockTest, Now_DoesNotMoveOnItsOwn) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  absl::SleepFor(absl::Milliseconds(2));
  EXPECT_EQ(clock.Now(), start);
}

TEST(RealClockTest, Now_IsCloseToAbslNow) {
  EXPECT_LT(absl::AbsDuration(RealClock::Get().Now() - absl::Now()), absl::Seconds(1));
}

}  // namespace
}  // namespace ddp
