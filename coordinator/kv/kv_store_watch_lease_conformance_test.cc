// The conformance suite of watches, leases, compaction and group commit, run
// against every KvBackend (InMemoryKvBackend and SqliteKvBackend).

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "coordinator/kv/testing/backend_factories.h"
#include "coordinator/kv/testing/kv_store_fixture.h"
#include "coordinator/kv/testing/watch_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::kv::testing {
namespace {

using ::testing::HasSubstr;

template <typename Factory>
using KvStoreWatchLeaseTest = KvStoreConformanceTest<Factory>;
using Backends = ::testing::Types<InMemoryBackendFactory, SqliteBackendFactory>;
TYPED_TEST_SUITE(KvStoreWatchLeaseTest, Backends);

TYPED_TEST(KvStoreWatchLeaseTest, Watch_FromRevisionOne_ReplaysHistoryThenLive) {
  this->MustPut("p/a", "1");
  this->MustPut("other", "x");
  ASSERT_TRUE(this->store_->Delete({"job", "p/a"}).ok());
  auto sink = std::make_shared<CountingSink>();
  auto id = this->store_->Watch({"job", "p/", 1}, sink);
  ASSERT_TRUE(id.ok()) << id.status();
  std::vector<Event> events;
  ASSERT_TRUE(Drain(*this->store_, *id, &events).ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, EventType::kPut);
  EXPECT_EQ(events[0].kv.value, "1");
  EXPECT_EQ(events[0].revision(), 1);
  EXPECT_EQ(events[1].type, EventType::kDelete);
  EXPECT_EQ(events[1].kv.key, "p/a");
  EXPECT_EQ(events[1].revision(), 3);
  this->MustPut("p/b", "2");
  EXPECT_EQ(sink->ready_calls.load(), 1);  // armed by the empty Take
  ASSERT_TRUE(Drain(*this->store_, *id, &events).ok());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].kv.key, "p/b");
  EXPECT_EQ(events[2].revision(), 4);
  this->store_->CancelWatch(*id);
  EXPECT_EQ(this->store_->Status().watchers, 0);
}

TYPED_TEST(KvStoreWatchLeaseTest, Watch_FromZero_OnlyNewEventsOfItsNamespace) {
  this->MustPut("a", "old");
  auto id = this->store_->Watch({"job", "", 0}, std::make_shared<CountingSink>());
  ASSERT_TRUE(id.ok());
  this->MustPut("a", "other-ns", 0, "job2");
  this->MustPut("a", "new");
  std::vector<Event> events;
  ASSERT_TRUE(Drain(*this->store_, *id, &events).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kv.value, "new");
  EXPECT_EQ(events[0].kv.version, 2);
}

TYPED_TEST(KvStoreWatchLeaseTest, Watch_CatchUpWhileCommitting_NoGapNoDuplicate) {
  constexpr int kPuts = 400;
  this->options_.watch.max_events_per_take = 7;  // many small history pages
  this->Reopen();
  std::atomic<bool> writer_done{false};
  std::thread writer([&] {
    for (int i = 0; i < kPuts; ++i) this->MustPut("k" + std::to_string(i % 13), "v");
    writer_done = true;
  });
  while (this->store_->Status().revision < kPuts / 4) std::this_thread::yield();
  auto id = this->store_->Watch({"job", "", 1}, std::make_shared<CountingSink>());
  ASSERT_TRUE(id.ok());
  std::vector<Event> events;
  while (!writer_done) ASSERT_TRUE(Drain(*this->store_, *id, &events).ok());
  writer.join();
  ASSERT_TRUE(Drain(*this->store_, *id, &events).ok());
  ASSERT_EQ(events.size(), static_cast<size_t>(kPuts));
  for (int i = 0; i < kPuts; ++i) EXPECT_EQ(events[i].revision(), i + 1);
}

TYPED_TEST(KvStoreWatchLeaseTest, Watch_MultiEventRevisionAcrossPages_DeliveredOnce) {
  this->options_.watch.max_events_per_take = 2;
  this->Reopen();
  for (int i = 0; i < 5; ++i) this->MustPut("p" + std::to_string(i), "v");
  ASSERT_TRUE(this->store_->Delete({"job", "p", true}).ok());
  auto id = this->store_->Watch({"job", "", 1}, std::make_shared<CountingSink>());
  ASSERT_TRUE(id.ok());
  std::vector<Event> events;
  ASSERT_TRUE(Drain(*this->store_, *id, &events).ok());
  ASSERT_EQ(events.size(), 10u);
  for (int i = 5; i < 10; ++i) {
    EXPECT_EQ(events[i].type, EventType::kDelete);
    EXPECT_EQ(events[i].revision(), 6);
    EXPECT_EQ(events[i].kv.key, "p" + std::to_string(i - 5));
  }
}

TYPED_TEST(KvStoreWatchLeaseTest, Watch_SlowWatcher_CaughtUpFromHistory) {
  this->options_.watch.max_queued_bytes = 1000;
  this->Reopen();
  auto id = this->store_->Watch({"job", "", 0}, std::make_shared<CountingSink>());
  ASSERT_TRUE(id.ok());
  for (int i = 0; i < 20; ++i) this->MustPut("k", std::string(200, 'a' + i));
  std::vector<Event> events;
  ASSERT_TRUE(Drain(*this->store_, *id, &events).ok());
  ASSERT_EQ(events.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(events[i].revision(), i + 1);
    EXPECT_EQ(events[i].kv.value, std::string(200, 'a' + i));
  }
}

TYPED_TEST(KvStoreWatchLeaseTest, Watch_FromCompactedRevision_OutOfRange) {
  for (int i = 0; i < 5; ++i) this->MustPut("k", std::to_string(i));
  auto compacted = this->store_->Compact(4);
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  EXPECT_EQ(compacted->compacted_revision, 3);
  auto refused = this->store_->Watch({"job", "", 3}, std::make_shared<CountingSink>());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(refused.status().message(), HasSubstr("compacted"));
  auto id = this->store_->Watch({"job", "", 4}, std::make_shared<CountingSink>());
  ASSERT_TRUE(id.ok());
  std::vector<Event> events;
  ASSERT_TRUE(Drain(*this->store_, *id, &events).ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].revision(), 4);
  EXPECT_EQ(this->store_->Status().compacted_revision, 3);
}

TYPED_TEST(KvStoreWatchLeaseTest, Compact_FutureRevision_OutOfRange) {
  this->MustPut("k", "v");
  EXPECT_EQ(this->store_->Compact(5).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(this->store_->Compact(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TYPED_TEST(KvStoreWatchLeaseTest, HistoryRetention_ManyWrites_CompactsAutomatically) {
  this->options_.history_revisions = 10;
  this->Reopen();
  for (int i = 0; i < 30; ++i) this->MustPut("k", std::to_string(i));
  const KvStoreStatus status = this->store_->Status();
  EXPECT_GT(status.compacted_revision, 0);
  EXPECT_GE(status.revision - status.compacted_revision, 10);
  EXPECT_LE(status.revision - status.compacted_revision, 12);
}

TYPED_TEST(KvStoreWatchLeaseTest, Lease_Expiry_DeletesKeysAndWatcherSeesDelete) {
  auto lease = this->store_->LeaseGrant(1000);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->ttl_ms, 1000);
  this->MustPut("a", "1", lease->lease);
  this->MustPut("b", "2", lease->lease);
  this->MustPut("c", "3");
  auto id = this->store_->Watch({"job", "", 0}, std::make_shared<CountingSink>());
  ASSERT_TRUE(id.ok());
  this->clock_.Advance(absl::Milliseconds(600));
  ASSERT_TRUE(this->store_->LeaseKeepAlive(lease->lease).ok());
  this->clock_.Advance(absl::Milliseconds(600));
  this->store_->Tick();  // 600 ms after the keep-alive: still alive
  EXPECT_TRUE(this->store_->Get({"job", "a"}).ok());
  this->clock_.Advance(absl::Milliseconds(400));
  this->store_->Tick();
  // The expiry is a queued write; a later write's reply proves it was
  // published.
  this->MustPut("sync", "x");
  EXPECT_EQ(this->store_->Get({"job", "a"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->Get({"job", "b"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(this->store_->Get({"job", "c"}).ok());
  EXPECT_EQ(this->store_->Status().leases, 0);
  EXPECT_EQ(this->store_->LeaseKeepAlive(lease->lease).status().code(),
            absl::StatusCode::kNotFound);
  std::vector<Event> events;
  ASSERT_TRUE(Drain(*this->store_, *id, &events).ok());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, EventType::kDelete);
  EXPECT_EQ(events[1].type, EventType::kDelete);
  EXPECT_EQ(events[0].revision(), events[1].revision());
  EXPECT_EQ(events[2].kv.key, "sync");
}

TYPED_TEST(KvStoreWatchLeaseTest, LeaseRevoke_DeletesOnlyItsKeys) {
  auto lease = this->store_->LeaseGrant(5000);
  ASSERT_TRUE(lease.ok());
  this->MustPut("a", "1", lease->lease);
  this->MustPut("b", "1", lease->lease);
  this->MustPut("b", "detached");  // a put without lease detaches the key
  auto revoked = this->store_->LeaseRevoke(lease->lease);
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->deleted, 1);
  EXPECT_EQ(this->store_->Get({"job", "a"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->Get({"job", "b"})->kv.value, "detached");
}

TYPED_TEST(KvStoreWatchLeaseTest, Lease_Unknown_NotFoundEverywhere) {
  EXPECT_EQ(this->store_->Put({"job", "k", "v", 42}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->LeaseKeepAlive(42).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->LeaseRevoke(42).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(this->store_->LeaseGrant(1).status().code(), absl::StatusCode::kInvalidArgument);
}

TYPED_TEST(KvStoreWatchLeaseTest, LeaseGrant_Twice_DistinctIds) {
  auto first = this->store_->LeaseGrant(1000);
  auto second = this->store_->LeaseGrant(1000);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(first->lease, second->lease);
  EXPECT_EQ(this->store_->Status().leases, 2);
}

TYPED_TEST(KvStoreWatchLeaseTest, Shutdown_PendingWaitAndWatcher_Unavailable) {
  absl::Notification done;
  absl::Status wait_status;
  this->store_->WaitAsync({"job", {"never"}, 100000}, [&](absl::StatusOr<WaitResult> r) {
    wait_status = r.status();
    done.Notify();
  });
  auto id = this->store_->Watch({"job", "", 0}, std::make_shared<CountingSink>());
  ASSERT_TRUE(id.ok());
  this->store_->Shutdown();
  ASSERT_TRUE(done.HasBeenNotified());
  EXPECT_EQ(wait_status.code(), absl::StatusCode::kUnavailable);
  WatchBatch batch;
  EXPECT_EQ(this->store_->TakeWatchEvents(*id, &batch).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(this->store_->Put({"job", "k", "v"}).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ddp::kv::testing
