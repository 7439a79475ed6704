#include "client/agent/backoff.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

BackoffOptions Options(int min_ms, int max_ms, double multiplier) {
  BackoffOptions o;
  o.min_delay = absl::Milliseconds(min_ms);
  o.max_delay = absl::Milliseconds(max_ms);
  o.multiplier = multiplier;
  return o;
}

TEST(Backoff, NextDelay_TopOfJitter_GrowsGeometricallyUpToMax) {
  Backoff backoff(Options(100, 1000, 2.0), [] { return 1.0; });
  std::vector<absl::Duration> delays;
  for (int i = 0; i < 6; ++i) delays.push_back(backoff.NextDelay());
  EXPECT_EQ(delays,
            (std::vector<absl::Duration>{absl::Milliseconds(100), absl::Milliseconds(200),
                                         absl::Milliseconds(400), absl::Milliseconds(800),
                                         absl::Milliseconds(1000), absl::Milliseconds(1000)}));
  EXPECT_EQ(backoff.failures(), 6);
}

TEST(Backoff, NextDelay_BottomOfJitter_AlwaysMinDelay) {
  Backoff backoff(Options(50, 5000, 3.0), [] { return 0.0; });
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(50));
  }
}

TEST(Backoff, NextDelay_HalfJitter_MidpointBetweenMinAndCeiling) {
  Backoff backoff(Options(100, 10000, 2.0), [] { return 0.5; });
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(100));
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(150));  // ceiling 200
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(250));  // ceiling 400
}

TEST(Backoff, Reset_AfterFailures_StartsFromMinAgain) {
  Backoff backoff(Options(100, 1000, 2.0), [] { return 1.0; });
  backoff.NextDelay();
  backoff.NextDelay();
  backoff.NextDelay();
  backoff.Reset();
  EXPECT_EQ(backoff.failures(), 0);
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(100));
}

TEST(Backoff, NextDelay_RandomOutOfRange_Clamped) {
  double value = 7.0;
  Backoff backoff(Options(100, 1000, 2.0), [&] { return value; });
  backoff.NextDelay();
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(200));
  value = -3.0;
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(100));
}

TEST(Backoff, Constructor_BadOptions_Repaired) {
  Backoff backoff(Options(-5, -10, 0.5), [] { return 1.0; });
  EXPECT_EQ(backoff.NextDelay(), absl::ZeroDuration());
  EXPECT_EQ(backoff.NextDelay(), absl::ZeroDuration());
}

TEST(Backoff, NextDelay_DefaultRandom_WithinBounds) {
  Backoff backoff(Options(10, 80, 2.0));
  for (int i = 0; i < 100; ++i) {
    absl::Duration d = backoff.NextDelay();
    EXPECT_GE(d, absl::Milliseconds(10));
    EXPECT_LE(d, absl::Milliseconds(80));
  }
}

TEST(Backoff, NextDelay_ManyFailures_NoOverflow) {
  Backoff backoff(Options(1, 2000, 10.0), [] { return 1.0; });
  for (int i = 0; i < 10000; ++i) backoff.NextDelay();
  EXPECT_EQ(backoff.NextDelay(), absl::Milliseconds(2000));
}

}  // namespace
}  // namespace ddp::client
