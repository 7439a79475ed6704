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

TEST(SteadyWallClockTest, Now_ReadsTheWallClockButIgnoresItsSteps) {
  FakeClock wall(absl::FromUnixSeconds(1'800'000'000));
  FakeClock monotonic(absl::FromUnixSeconds(5000));
  SteadyWallClock clock(wall, monotonic);
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1'800'000'000));
  monotonic.Advance(absl::Seconds(2));
  wall.Advance(absl::Seconds(2));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1'800'000'002));
  wall.Advance(absl::Hours(1));  // someone set the time forward
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1'800'000'002));
  wall.Advance(-absl::Hours(2));  // and back
  monotonic.Advance(absl::Milliseconds(500));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1'800'000'002) + absl::Milliseconds(500));
}

TEST(SteadyWallClockTest, Get_CloseToTheWallClockNow) {
  EXPECT_LT(absl::AbsDuration(SteadyWallClock::Get().Now() - absl::Now()), absl::Seconds(1));
}

}  // namespace
}  // namespace ddp
