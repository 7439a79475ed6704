#include "coordinator/kv/watch_hub.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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
void CommitAndPublish(testing::FakeKvBackend& backend, WatchHub& hub, const Event& event) {
  KvWriteBatch batch;
  batch.revision = event.revision();
  batch.events = {event};
  ASSERT_TRUE(backend.Commit(batch).ok());
  hub.Publish(batch.events, batch.revision);
}

TEST(WatchHubTest, Take_HistoryThenLive_InOrderAndNotifiesOnce) {
  testing::FakeKvBackend backend;
  WatchHub hub(backend, WatchHubOptions());
  for (Revision r = 1; r <= 3; ++r) CommitAndPublish(backend, hub, PutEvent("k", r));
  auto sink = std::make_shared<testing::CountingSink>();
  auto id = hub.Add({"ns", "", 2}, sink);
  ASSERT_TRUE(id.ok());
  CommitAndPublish(backend, hub, PutEvent("k", 4));  // queued during catch-up
  WatchBatch batch;
  ASSERT_TRUE(hub.Take(*id, &batch).ok());
  ASSERT_EQ(batch.event_count(), 2u);
  EXPECT_EQ(batch.CopyEvents()[0].revision(), 2);
  ASSERT_TRUE(hub.Take(*id, &batch).ok());
  ASSERT_EQ(batch.event_count(), 1u);
  EXPECT_EQ(batch.CopyEvents()[0].revision(), 4);
  ASSERT_TRUE(hub.Take(*id, &batch).ok());
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(sink->ready_calls.load(), 0);
  CommitAndPublish(backend, hub, PutEvent("k", 5));
  CommitAndPublish(backend, hub, PutEvent("k", 6));
  EXPECT_EQ(sink->ready_calls.load(), 1);
  ASSERT_TRUE(hub.Take(*id, &batch).ok());
  EXPECT_EQ(batch.event_count(), 2u);
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
  ASSERT_EQ(batch.event_count(), 1u);
  EXPECT_EQ(batch.CopyEvents()[0].kv.key, "p/x");
}

Event BigPutEvent(const std::string& key, Revision revision, size_t value_bytes) {
  Event event = PutEvent(key, revision);
  event.kv.value = std::string(value_bytes, 'v');
  return event;
}

// Takes until an empty batch; every event must follow `*next` (no gap, no
// duplicate). Returns the largest batch in bytes.
size_t TakeAllInOrder(WatchHub& hub, WatchId id, Revision* next) {
  size_t largest = 0;
  while (true) {
    WatchBatch batch;
    const absl::Status status = hub.Take(id, &batch);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok() || batch.empty()) return largest;
    size_t bytes = 0;
    for (const Event& event : batch.CopyEvents()) {
      EXPECT_EQ(event.revision(), *next);
      *next = event.revision() + 1;
      bytes += PublishedEvents::ApproxBytes(event);
    }
    largest = std::max(largest, bytes);
  }
}

TEST(WatchHubTest, Publish_QueueOverflow_CatchesUpFromHistoryNothingLost) {
  testing::FakeKvBackend backend;
  WatchHubOptions options;
  options.max_queued_events = 2;
  WatchHub hub(backend, options);
  auto sink = std::make_shared<testing::CountingSink>();
  auto id = hub.Add({"ns", "", 0}, sink);
  ASSERT_TRUE(id.ok());
  WatchBatch idle;
  ASSERT_TRUE(hub.Take(*id, &idle).ok());  // as a stream does when it opens
  for (Revision r = 1; r <= 5; ++r) CommitAndPublish(backend, hub, PutEvent("k", r));
  EXPECT_EQ(sink->ready_calls.load(), 1);  // once; it has not come back since
  const WatchHub::WatcherStats stats = hub.Stats(*id);
  EXPECT_LE(stats.queued_events, 2u);
  EXPECT_TRUE(stats.catching_up);
  EXPECT_GE(stats.fell_behind, 1);
  Revision next = 1;
  TakeAllInOrder(hub, *id, &next);
  EXPECT_EQ(next, 6);
  // Live again: the next commit is queued, not read from the history.
  CommitAndPublish(backend, hub, PutEvent("k", 6));
  EXPECT_FALSE(hub.Stats(*id).catching_up);
  EXPECT_EQ(hub.Stats(*id).queued_events, 1u);
}

TEST(WatchHubTest, Publish_WatcherNeverTakes_HoldsAtMostMaxQueuedBytes) {
  testing::FakeKvBackend backend;
  WatchHubOptions options;
  options.max_queued_bytes = 64 << 10;
  options.max_take_bytes = 16 << 10;
  WatchHub hub(backend, options);
  auto id = hub.Add({"ns", "", 0}, std::make_shared<testing::CountingSink>());
  ASSERT_TRUE(id.ok());
  // 8 MiB of writes (2,048 puts of 4 KiB) that the watcher never takes.
  size_t most_held = 0;
  for (Revision r = 1; r <= 2048; ++r) {
    CommitAndPublish(backend, hub, BigPutEvent("k", r, 4096));
    most_held = std::max(most_held, hub.Stats(*id).queued_bytes);
  }
  EXPECT_LE(most_held, options.max_queued_bytes);
  EXPECT_GT(hub.Stats(*id).fell_behind, 0);
  // When it reads, it gets every event once and in order, in takes of about
  // max_take_bytes.
  Revision next = 1;
  const size_t largest = TakeAllInOrder(hub, *id, &next);
  EXPECT_EQ(next, 2049);
  EXPECT_LE(largest, options.max_take_bytes + 4096 + 64);
}

TEST(WatchHubTest, Publish_FellBehindThenCompacted_OutOfRangeNamingRevision) {
  testing::FakeKvBackend backend;
  WatchHubOptions options;
  options.max_queued_events = 2;
  WatchHub hub(backend, options);
  auto id = hub.Add({"ns", "", 0}, std::make_shared<testing::CountingSink>());
  ASSERT_TRUE(id.ok());
  for (Revision r = 1; r <= 5; ++r) CommitAndPublish(backend, hub, PutEvent("k", r));
  ASSERT_TRUE(backend.Compact(3).ok());
  WatchBatch batch;
  const absl::Status status = hub.Take(*id, &batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("from revision 1"));
}

TEST(WatchHubTest, Publish_OversizedCommitToIdleWatcher_DeliveredLive) {
  testing::FakeKvBackend backend;
  WatchHubOptions options;
  options.max_queued_bytes = 1024;
  WatchHub hub(backend, options);
  auto sink = std::make_shared<testing::CountingSink>();
  auto id = hub.Add({"ns", "", 0}, sink);
  ASSERT_TRUE(id.ok());
  WatchBatch batch;
  ASSERT_TRUE(hub.Take(*id, &batch).ok());  // idle
  CommitAndPublish(backend, hub, BigPutEvent("k", 1, 4096));
  EXPECT_EQ(sink->ready_calls.load(), 1);
  EXPECT_FALSE(hub.Stats(*id).catching_up);
  ASSERT_TRUE(hub.Take(*id, &batch).ok());
  EXPECT_EQ(batch.event_count(), 1u);
}

TEST(WatchHubTest, Add_OverLimitOrClosed_Refused) {
  testing::FakeKvBackend backend;
  WatchHubOptions options;
  options.max_watchers = 1;
  WatchHub hub(backend, options);
  ASSERT_TRUE(hub.Add({"ns", "", 0}, std::make_shared<testing::CountingSink>()).ok());
  EXPECT_EQ(hub.Add({"ns", "", 0}, std::make_shared<testing::CountingSink>()).status().code(),
            absl::StatusCode::kResourceExhausted);
  hub.CancelAll(absl::UnavailableError("closing"));
  EXPECT_EQ(hub.Add({"ns", "", 0}, std::make_shared<testing::CountingSink>()).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(WatchHubTest, Take_HistoryCompacted_OutOfRange) {
  testing::FakeKvBackend backend;
  WatchHub hub(backend, WatchHubOptions());
  for (Revision r = 1; r <= 3; ++r) CommitAndPublish(backend, hub, PutEvent("k", r));
  auto id = hub.Add({"ns", "", 1}, std::make_shared<testing::CountingSink>());
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(backend.Compact(2).ok());
  WatchBatch batch;
  EXPECT_EQ(hub.Take(*id, &batch).code(), absl::StatusCode::kOutOfRange);
}

// One commit of several events (one revision each), committed and published
// with the sinks returned instead of notified.
std::vector<std::shared_ptr<WatchSink>> CommitAndPublishDeferred(testing::FakeKvBackend& backend,
                                                                 WatchHub& hub,
                                                                 const std::vector<Event>& events) {
  KvWriteBatch batch;
  batch.revision = events.back().revision();
  batch.events = events;
  EXPECT_TRUE(backend.Commit(batch).ok());
  std::vector<std::shared_ptr<WatchSink>> to_notify;
  hub.Publish(batch.events, batch.revision, &to_notify);
  return to_notify;
}

TEST(WatchHubTest, Publish_ManyWatchers_ShareOneCopyOfTheCommit) {
  testing::FakeKvBackend backend;
  WatchHub hub(backend, WatchHubOptions());
  std::vector<WatchId> ids;
  for (int i = 0; i < 100; ++i) {
    auto id = hub.Add({"ns", "k", 0}, std::make_shared<testing::CountingSink>());
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  CommitAndPublish(backend, hub, PutEvent("k", 1));
  const PublishedEvents* shared = nullptr;
  for (WatchId id : ids) {
    WatchBatch batch;
    ASSERT_TRUE(hub.Take(id, &batch).ok());
    ASSERT_EQ(batch.chunks.size(), 1u);
    if (shared == nullptr) shared = batch.chunks[0].get();
    EXPECT_EQ(batch.chunks[0].get(), shared);  // the same object, no copy
    EXPECT_EQ(batch.chunks[0]->revision(), 1);
  }
}

TEST(WatchHubTest, Publish_PartialMatch_OneSharedSubsetPerPrefix) {
  testing::FakeKvBackend backend;
  WatchHub hub(backend, WatchHubOptions());
  auto a1 = hub.Add({"ns", "a/", 0}, std::make_shared<testing::CountingSink>());
  auto a2 = hub.Add({"ns", "a/", 0}, std::make_shared<testing::CountingSink>());
  auto all = hub.Add({"ns", "", 0}, std::make_shared<testing::CountingSink>());
  ASSERT_TRUE(a1.ok() && a2.ok() && all.ok());
  CommitAndPublishDeferred(backend, hub,
                           {PutEvent("a/x", 1), PutEvent("b/y", 2), PutEvent("a/z", 3)});
  WatchBatch b1, b2, b_all;
  ASSERT_TRUE(hub.Take(*a1, &b1).ok());
  ASSERT_TRUE(hub.Take(*a2, &b2).ok());
  ASSERT_TRUE(hub.Take(*all, &b_all).ok());
  ASSERT_EQ(b1.chunks.size(), 1u);
  EXPECT_EQ(b1.chunks[0].get(), b2.chunks[0].get());
  std::vector<Event> events = b1.CopyEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kv.key, "a/x");
  EXPECT_EQ(events[1].kv.key, "a/z");
  EXPECT_EQ(b_all.event_count(), 3u);
  EXPECT_NE(b_all.chunks[0].get(), b1.chunks[0].get());
}

TEST(WatchHubTest, PublishDeferred_ReturnsIdleSinksWithoutCallingThem) {
  testing::FakeKvBackend backend;
  WatchHub hub(backend, WatchHubOptions());
  auto idle = std::make_shared<testing::CountingSink>();
  auto busy = std::make_shared<testing::CountingSink>();
  auto idle_id = hub.Add({"ns", "", 0}, idle);
  auto busy_id = hub.Add({"ns", "", 0}, busy);
  ASSERT_TRUE(idle_id.ok() && busy_id.ok());
  WatchBatch batch;
  ASSERT_TRUE(hub.Take(*idle_id, &batch).ok());  // empty: armed
  std::vector<std::shared_ptr<WatchSink>> to_notify =
      CommitAndPublishDeferred(backend, hub, {PutEvent("k", 1)});
  ASSERT_EQ(to_notify.size(), 1u);
  EXPECT_EQ(to_notify[0].get(), idle.get());
  EXPECT_EQ(idle->ready_calls.load(), 0);  // the caller notifies
  // Armed once: the next commit does not ask again until the watcher Takes.
  EXPECT_TRUE(CommitAndPublishDeferred(backend, hub, {PutEvent("k", 2)}).empty());
  ASSERT_TRUE(hub.Take(*busy_id, &batch).ok());
  EXPECT_EQ(batch.event_count(), 2u);
}

// 2,000 commits of one put each, published by another thread while watcher
// `id` takes: every event arrives once and in order. Returns the largest
// batch taken.
size_t TakeWhileCommitting(testing::FakeKvBackend& backend, WatchHub& hub, WatchId id) {
  constexpr Revision kCommits = 2000;
  std::thread committer([&] {
    for (Revision r = 1; r <= kCommits; ++r) {
      CommitAndPublishDeferred(backend, hub, {PutEvent("k", r)});
    }
  });
  size_t largest = 0;
  Revision expected = 1;
  bool in_order = true;
  while (in_order && expected <= kCommits) {
    WatchBatch batch;
    const absl::Status status = hub.Take(id, &batch);
    EXPECT_TRUE(status.ok()) << status;
    in_order = status.ok();
    largest = std::max(largest, batch.event_count());
    for (const Event& event : batch.CopyEvents()) {
      in_order = in_order && event.revision() == expected;  // no gap, no duplicate
      ++expected;
    }
  }
  // Joined before any failure returns: the committer uses the hub.
  committer.join();
  EXPECT_TRUE(in_order) << "a gap or a duplicate before revision " << expected;
  return largest;
}

TEST(WatchHubTest, Take_ConcurrentPublish_EveryEventOnceInOrder) {
  testing::FakeKvBackend backend;
  WatchHubOptions options;
  options.max_events_per_take = 7;
  WatchHub hub(backend, options);
  auto id = hub.Add({"ns", "", 0}, std::make_shared<testing::CountingSink>());
  ASSERT_TRUE(id.ok());
  EXPECT_LE(TakeWhileCommitting(backend, hub, *id), 7u);
}

TEST(WatchHubTest, Take_ConcurrentPublishTinyQueue_EveryEventOnceInOrder) {
  testing::FakeKvBackend backend;
  WatchHubOptions options;
  options.max_events_per_take = 5;
  options.max_queued_events = 3;  // falls behind over and over
  WatchHub hub(backend, options);
  auto id = hub.Add({"ns", "", 0}, std::make_shared<testing::CountingSink>());
  ASSERT_TRUE(id.ok());
  TakeWhileCommitting(backend, hub, *id);
  EXPECT_GT(hub.Stats(*id).fell_behind, 0);
}

// A history page may end inside a revision (here: pages of two events, three
// events at revision 2): complete_through then stops before it, so a client
// told to resume from complete_through + 1 misses none of that revision.
TEST(WatchHubTest, Take_HistoryPageEndsInsideRevision_CompleteThroughBeforeIt) {
  testing::FakeKvBackend backend;
  WatchHubOptions options;
  options.max_events_per_take = 2;
  WatchHub hub(backend, options);
  CommitAndPublishDeferred(backend, hub, {PutEvent("k1", 1)});
  CommitAndPublishDeferred(backend, hub,
                           {PutEvent("k2a", 2), PutEvent("k2b", 2), PutEvent("k2c", 2)});
  CommitAndPublishDeferred(backend, hub, {PutEvent("k3", 3)});
  auto id = hub.Add({"ns", "", 1}, std::make_shared<testing::CountingSink>());
  ASSERT_TRUE(id.ok());
  std::vector<std::pair<size_t, Revision>> pages;  // events, complete_through
  for (int i = 0; i < 4; ++i) {
    WatchBatch batch;
    ASSERT_TRUE(hub.Take(*id, &batch).ok());
    pages.emplace_back(batch.event_count(), batch.complete_through);
  }
  EXPECT_THAT(pages, ::testing::ElementsAre(
                         std::pair<size_t, Revision>(2, 1), std::pair<size_t, Revision>(2, 2),
                         std::pair<size_t, Revision>(1, 3), std::pair<size_t, Revision>(0, 3)));
}

// A sink that records OnReady calls and lets a consumer wait for the next.
class SignallingSink : public WatchSink {
 public:
  void OnReady() override {
    absl::MutexLock lock(&mu_);
    ++calls_;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  // Whether OnReady was called more than `seen` times within `timeout`.
  bool WaitBeyond(int seen, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto more = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_ > seen; };
    return mu_.AwaitWithTimeout(absl::Condition(&more), timeout);
  }

 private:
  absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
};

// Issue 23, point 7: a watcher went silent with no error. The consumer here
// does what the gRPC Watch reactor does: after an empty Take it waits for
// OnReady. An empty batch must therefore always leave the watcher armed, even
// when a commit overflows its queue (sending it back to the history) between
// Take's look at the catch-up state and its look at the queue; before the
// fix, Take then returned an empty batch unarmed and OnReady never came.
TEST(WatchHubTest, Take_EmptyBatchWhileQueueOverflows_OnReadyAlwaysFollows) {
  constexpr Revision kCommits = 500;
  constexpr int kRounds = 1500;
  for (int round = 0; round < kRounds; ++round) {
    testing::FakeKvBackend backend;
    WatchHubOptions options;
    options.max_queued_events = 2;  // over and over back to the history
    options.max_events_per_take = 3;
    WatchHub hub(backend, options);
    auto sink = std::make_shared<SignallingSink>();
    auto id = hub.Add({"ns", "", 0}, sink);
    ASSERT_TRUE(id.ok());
    std::atomic<bool> stop{false};
    std::thread committer([&] {
      for (Revision r = 1; r <= kCommits && !stop; ++r) {
        CommitAndPublish(backend, hub, PutEvent("k", r));
      }
    });
    Revision expected = 1;
    bool in_order = true, stalled = false;
    while (in_order && expected <= kCommits) {
      const int seen = sink->calls();
      WatchBatch batch;
      const absl::Status status = hub.Take(*id, &batch);
      ASSERT_TRUE(status.ok()) << status;
      if (batch.empty()) {
        // Every commit still to come notifies an armed watcher.
        if (!sink->WaitBeyond(seen, absl::Seconds(5))) {
          stalled = true;
          break;
        }
        continue;
      }
      for (const Event& event : batch.CopyEvents()) {
        in_order = in_order && event.revision() == expected;
        ++expected;
      }
    }
    stop = true;
    committer.join();
    ASSERT_FALSE(stalled) << "round " << round << ": an empty Take left the watcher unarmed at "
                          << "revision " << expected << "; it would never be notified again";
    ASSERT_TRUE(in_order) << "round " << round << ": a gap or a duplicate before revision "
                          << expected;
  }
}

}  // namespace
}  // namespace ddp::kv
