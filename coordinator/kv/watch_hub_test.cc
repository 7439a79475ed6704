#include "coordinator/kv/watch_hub.h"

#include <memory>

#include "coordinator/kv/testing/fake_kv_backend.h"
#include "coordinator/kv/testing/watch_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

Event PutEvent(const std::string& key, Revision revision) {
  Event event;
  event.kv.ns = "ns";
  event.kv.key = key;
  event.kv.mod_revision = revision;
  return event;
}

// Commits one put per revision to the history and publishes it.
void CommitAndPublish(testing::FakeKvBackend& backend, WatchHub& hub,
                      const Event& event) {
  KvWriteBatch batch;
  batch.revision = event.revision();
  batch.events = {event};
  ASSERT_TRUE(backend.Commit(batch).ok());
  hub.Publish(batch.events, batch.revision);
}

TEST(WatchHubTest, Take_HistoryThenLive_InOrderAndNotifiesOnce) {
  testing::FakeKvBackend backend;
  WatchHub hub(backend, WatchHubOptions());
  for (Revision r = 1; r <= 3; ++r)
    CommitAndPublish(backend, hub, PutEvent("k", r));
  auto sink = std::make_shared<testing::CountingSink>();
  auto id = hub.Add({"ns", "", 2}, sink);
  ASSERT_TRUE(id.ok());
  CommitAndPublish(backend, hub, PutEvent("k", 4));  // queued during catch-up
  WatchBatch batch;
  ASSERT_TRUE(hub.Take(*id, &batch).ok());
  ASSERT_EQ(batch.events.size(), 2u);
  EXPECT_EQ(batch.events[0].revision(), 2);
  ASSERT_TRUE(hub.Take(*id, &batch).ok());
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_EQ(batch.events[0].revision(), 4);
  ASSERT_TRUE(hub.Take(*id, &batch).ok());
  EXPECT_TRUE(batch.events.empty());
  EXPECT_EQ(sink->ready_calls.load(), 0);
  CommitAndPublish(backend, hub, PutEvent("k", 5));
  CommitAndPublish(backend, hub, PutEvent("k", 6));
  EXPECT_EQ(sink->ready_calls.load(), 1);
  ASSERT_TRUE(hub.Take(*id, &batch).ok());
  EXPECT_EQ(batch.events.size(), 2u);
  EXPECT_EQ(batch.revision, 6);
}

TEST(WatchHubTest, Publish_PrefixFilter_OnlyMatchingKeys) {
  testing::FakeKvBackend backend;
  WatchHub hub(backend, WatchHubOptions());
  auto id = hub.Add({"ns", "p/", 0}, std::make_shared<testing::CountingSink>());
  ASSERT_TRUE(id.ok());
  CommitAndPublish(backend, hub, PutEvent("q", 1));
  CommitAndPublish(backend, hub, PutEvent("p/x", 2));
  WatchBatch batch;
  ASSERT_TRUE(hub.Take(*id, &batch).ok());
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_EQ(batch.events[0].kv.key, "p/x");
}

TEST(WatchHubTest, Publish_QueueOverflow_CancelsWithResumeRevision) {
  testing::FakeKvBackend backend;
  WatchHubOptions options;
  options.max_queued_events = 2;
  WatchHub hub(backend, options);
  auto sink = std::make_shared<testing::CountingSink>();
  auto id = hub.Add({"ns", "", 0}, sink);
  ASSERT_TRUE(id.ok());
  for (Revision r = 1; r <= 3; ++r)
    CommitAndPublish(backend, hub, PutEvent("k", r));
  EXPECT_EQ(sink->ready_calls.load(), 1);
  WatchBatch batch;
  absl::Status status = hub.Take(*id, &batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("start_revision=1"));
}

TEST(WatchHubTest, Add_OverLimitOrClosed_Refused) {
  testing::FakeKvBackend backend;
  WatchHubOptions options;
  options.max_watchers = 1;
  WatchHub hub(backend, options);
  ASSERT_TRUE(
      hub.Add({"ns", "", 0}, std::make_shared<testing::CountingSink>()).ok());
  EXPECT_EQ(hub.Add({"ns", "", 0}, std::make_shared<testing::CountingSink>())
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
  hub.CancelAll(absl::UnavailableError("closing"));
  EXPECT_EQ(hub.Add({"ns", "", 0}, std::make_shared<testing::CountingSink>())
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
}

TEST(WatchHubTest, Take_HistoryCompacted_OutOfRange) {
  testing::FakeKvBackend backend;
  WatchHub hub(backend, WatchHubOptions());
  for (Revision r = 1; r <= 3; ++r)
    CommitAndPublish(backend, hub, PutEvent("k", r));
  auto id = hub.Add({"ns", "", 1}, std::make_shared<testing::CountingSink>());
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(backend.Compact(2).ok());
  WatchBatch batch;
  EXPECT_EQ(hub.Take(*id, &batch).code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace ddp::kv
