#include "coordinator/kv/wait_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(WaitRegistryTest, OnKeyPut_AllKeysArrive_FinishesOk) {
  WaitRegistry registry;
  int calls = 0;
  ASSERT_TRUE(registry
                  .Add(
                      "ns", {"a", "b"}, kStart + absl::Seconds(1), absl::Seconds(1),
                      [&](absl::Status) { ++calls; }, 10)
                  .ok());
  WaitRegistry::Finished finished;
  registry.OnKeyPut("ns", "a", &finished);
  registry.OnKeyPut("other", "b", &finished);
  EXPECT_TRUE(finished.empty());
  registry.OnKeyPut("ns", "b", &finished);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_TRUE(finished[0].second.ok());
  EXPECT_EQ(registry.size(), 0u);
  finished.clear();
  registry.Expire(kStart + absl::Hours(1), &finished);
  EXPECT_TRUE(finished.empty());
}

TEST(WaitRegistryTest, Expire_PastDeadline_DeadlineExceededNamingKey) {
  WaitRegistry registry;
  ASSERT_TRUE(
      registry
          .Add(
              "ns", {"late"}, kStart + absl::Seconds(1), absl::Seconds(1), [](absl::Status) {}, 10)
          .ok());
  WaitRegistry::Finished finished;
  registry.Expire(kStart + absl::Milliseconds(999), &finished);
  EXPECT_TRUE(finished.empty());
  registry.Expire(kStart + absl::Seconds(1), &finished);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].second.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(finished[0].second.message(), ::testing::HasSubstr("late"));
  finished.clear();
  registry.OnKeyPut("ns", "late", &finished);  // the index was cleaned up
  EXPECT_TRUE(finished.empty());
}

TEST(WaitRegistryTest, Add_OverLimit_ResourceExhausted) {
  WaitRegistry registry;
  ASSERT_TRUE(registry
                  .Add(
                      "ns", {"a"}, kStart, absl::Seconds(1), [](absl::Status) {}, 1)
                  .ok());
  EXPECT_EQ(registry
                .Add(
                    "ns", {"b"}, kStart, absl::Seconds(1), [](absl::Status) {}, 1)
                .code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(WaitRegistryTest, CancelAll_Pending_EachGetsStatus) {
  WaitRegistry registry;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(registry
                    .Add(
                        "ns", {"k"}, kStart, absl::Seconds(1), [](absl::Status) {}, 10)
                    .ok());
  }
  WaitRegistry::Finished finished;
  registry.CancelAll(absl::UnavailableError("bye"), &finished);
  EXPECT_EQ(finished.size(), 3u);
  EXPECT_EQ(registry.size(), 0u);
}

}  // namespace
}  // namespace ddp::kv
