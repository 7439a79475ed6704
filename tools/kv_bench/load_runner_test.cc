#include "tools/kv_bench/load_runner.h"

#include <atomic>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp::kv_bench {
namespace {

TEST(Quantile, KnownSamples_PicksNearestRank) {
  std::vector<absl::Duration> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(absl::Milliseconds(i));
  EXPECT_EQ(Quantile(samples, 0.5), absl::Milliseconds(50));
  EXPECT_EQ(Quantile(samples, 0.99), absl::Milliseconds(99));
  EXPECT_EQ(Quantile(samples, 1.0), absl::Milliseconds(100));
  std::vector<absl::Duration> empty;
  EXPECT_EQ(Quantile(empty, 0.5), absl::ZeroDuration());
}

TEST(FormatLatency, MicrosAndMillis) {
  EXPECT_EQ(FormatLatency(absl::Microseconds(850)), "850 us");
  EXPECT_EQ(FormatLatency(absl::Microseconds(12345)), "12.35 ms");
}

TEST(RunClosedLoop, CountsSuccessesAndErrorsPerClient) {
  std::atomic<int> calls{0};
  LoadOptions options;
  options.clients = 4;
  options.duration = absl::Milliseconds(50);
  options.warmup = absl::ZeroDuration();
  const LoadResult result = RunClosedLoop(options, [&](int client, int64_t) {
    ++calls;
    absl::SleepFor(absl::Microseconds(200));
    return client == 0 ? std::string("boom") : std::string();
  });
  EXPECT_GT(result.ops, 0);
  EXPECT_GT(result.errors, 0);
  EXPECT_EQ(result.first_error, "boom");
  EXPECT_EQ(result.ops + result.errors, calls.load());
  EXPECT_GE(result.p50, absl::Microseconds(200));
  EXPECT_GT(result.ops_per_second, 0);
}

}  // namespace
}  // namespace ddp::kv_bench
