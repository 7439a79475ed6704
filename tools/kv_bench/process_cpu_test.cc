#include "tools/kv_bench/process_cpu.h"

#include "gtest/gtest.h"

namespace ddp::kv_bench {
namespace {

TEST(ParseStatCpuTime, NameWithSpacesAndParens_ReadsFields14And15) {
  const char* stat =
      "4242 (kv (bench) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 "
      "250 50 0 0 20 0 9 0 1000 123456 789";
  absl::StatusOr<absl::Duration> cpu = ParseStatCpuTime(stat, 100);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(*cpu, absl::Seconds(3));
}

TEST(ParseStatCpuTime, Truncated_InvalidArgument) {
  EXPECT_EQ(ParseStatCpuTime("12 (x) S 1 2", 100).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseStatCpuTime("no parenthesis", 100).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReadProcessCpuTime, Self_GrowsWithWork) {
  absl::StatusOr<absl::Duration> before = ReadProcessCpuTime(0);
  ASSERT_TRUE(before.ok()) << before.status();
  volatile uint64_t sink = 0;
  absl::StatusOr<absl::Duration> after = before;
  // Spin until the kernel's tick-granular counter moves (bounded).
  for (int round = 0; round < 200 && *after == *before; ++round) {
    for (int i = 0; i < 10'000'000; ++i) sink = sink + i;
    after = ReadProcessCpuTime(0);
    ASSERT_TRUE(after.ok()) << after.status();
  }
  EXPECT_GT(*after, *before);
}

TEST(ReadProcessCpuTime, NoSuchProcess_NotFound) {
  EXPECT_EQ(ReadProcessCpuTime(999'999'999).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ddp::kv_bench
