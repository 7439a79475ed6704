// KvStore behaviour that needs a hand-made backend: group commit, commit
// failures.

#include "coordinator/kv/kv_store.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "coordinator/commit/testing/kv_store_with_loop.h"
#include "coordinator/kv/testing/fake_kv_backend.h"
#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

class KvStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = std::make_unique<testing::FakeKvBackend>();
    backend_ = backend.get();
    KvStoreOptions options;
    auto store = commit::KvStoreWithLoop::Open(std::move(backend), clock_, options);
    ASSERT_TRUE(store.ok());
    store_ = *std::move(store);
  }

  FakeClock clock_;
  testing::FakeKvBackend* backend_ = nullptr;
  commit::KvStoreWithLoop store_;
};

// Issue 23.1: a leader that may be deposed (its read_check fails) answers no
// read, whatever it holds; the check comes after the read.
TEST(KvStoreReadCheckTest, ReadCheckFails_GetAndRangeUnavailable) {
  FakeClock clock;
  KvStoreOptions options;
  std::atomic<bool> leading{true};
  options.read_check = [&leading] {
    return leading ? absl::OkStatus() : absl::UnavailableError("no longer the leader");
  };
  auto store =
      commit::KvStoreWithLoop::Open(std::make_unique<testing::FakeKvBackend>(), clock, options);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put({"job", "k", "old"}).ok());
  GetRequest get;
  get.ns = "job";
  get.key = "k";
  ASSERT_TRUE((*store)->Get(get).ok());
  RangeRequest range;
  range.ns = "job";
  ASSERT_TRUE((*store)->Range(range).ok());
  leading = false;
  absl::StatusOr<GetResult> stale = (*store)->Get(get);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(stale.status().message().find("no longer the leader"), std::string::npos);
  EXPECT_EQ((*store)->Range(range).status().code(), absl::StatusCode::kUnavailable);
  get.key = "missing";  // NOT_FOUND is an answer too: refused as well
  EXPECT_EQ((*store)->Get(get).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(KvStoreTest, PutAsync_ManyQueuedWrites_FewerCommitsThanWrites) {
  constexpr int kWrites = 2000;
  absl::Mutex mu;
  int finished = 0;
  absl::Notification all_done;
  for (int i = 0; i < kWrites; ++i) {
    store_->PutAsync({"job", "k" + std::to_string(i), "v"}, [&](absl::StatusOr<PutResult> r) {
      EXPECT_TRUE(r.ok());
      bool last = false;
      {
        absl::MutexLock lock(&mu);
        last = ++finished == kWrites;
      }
      if (last) all_done.Notify();
    });
  }
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_LT(backend_->commits(), kWrites);
  EXPECT_EQ(store_->Status().revision, kWrites);
}

TEST_F(KvStoreTest, Put_CommitFails_UnavailableAndStateUnchanged) {
  ASSERT_TRUE(store_->Put({"job", "a", "1"}).ok());
  backend_->FailNextCommits(1);
  auto failed = store_->Put({"job", "a", "2"});
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store_->Get({"job", "a"})->kv.value, "1");
  EXPECT_EQ(store_->Status().revision, 1);
  auto retried = store_->Put({"job", "a", "2"});
  ASSERT_TRUE(retried.ok());
  EXPECT_EQ(retried->revision, 2);
}

TEST_F(KvStoreTest, Put_CommitOutcomeUnknown_UnknownThenWritesRefusedReadsServed) {
  ASSERT_TRUE(store_->Put({"job", "a", "1"}).ok());
  backend_->FailNextCommits(1, absl::UnknownError("fsync failed"));
  auto unknown = store_->Put({"job", "a", "2"});
  ASSERT_EQ(unknown.status().code(), absl::StatusCode::kUnknown) << unknown.status();
  EXPECT_NE(unknown.status().message().find("outcome of this write is unknown"),
            absl::string_view::npos);
  EXPECT_EQ(unknown.status().message().find("no effect"), absl::string_view::npos);
  // Fail-stop: later writes are refused (truly without effect), reads serve.
  auto refused = store_->Put({"job", "b", "1"});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("until the coordinator is restarted"),
            absl::string_view::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("this write had no effect"), absl::string_view::npos)
      << refused.status();
  EXPECT_EQ(backend_->commits(), 2);  // the refused write never reached it
  EXPECT_EQ(store_->Get({"job", "a"})->kv.value, "1");
  EXPECT_FALSE(store_->Add({"job", "n", 1}).ok());
  // Readiness (/readyz) names the failure, and never as "no effect" (issue
  // 23.10): whether the last write is on disk is not known.
  const absl::Status health = store_->WriteHealth();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(health.message().find("until the coordinator is restarted"), absl::string_view::npos);
  EXPECT_EQ(health.message().find("no effect"), absl::string_view::npos) << health;
  EXPECT_EQ(store_->FailStop(), health);
}

TEST_F(KvStoreTest, Put_BackendRefusesWrites_FailStop) {
  backend_->FailNextCommits(
      1, absl::FailedPreconditionError("database refuses writes after a storage failure"));
  auto first = store_->Put({"job", "a", "1"});
  ASSERT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(first.status().message().find("had no effect"), absl::string_view::npos);
  auto second = store_->Put({"job", "a", "1"});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(backend_->commits(), 1);
}

TEST_F(KvStoreTest, WriteHealth_CommitsFailing_UnavailableUntilOneSucceeds) {
  ASSERT_TRUE(store_->WriteHealth().ok());
  backend_->FailNextCommits(3, absl::UnavailableError("database is locked"));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(store_->Put({"job", "a", "1"}).ok());
  const absl::Status health = store_->WriteHealth();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(health.message().find("database is locked"), absl::string_view::npos) << health;
  // Failing commits are retried: the store is not fail-stop, writes are taken.
  EXPECT_TRUE(store_->FailStop().ok());
  ASSERT_TRUE(store_->Put({"job", "a", "1"}).ok());
  EXPECT_TRUE(store_->WriteHealth().ok());
}

TEST_F(KvStoreTest, WriteHealth_FailedCommitLongAgo_OkAgain) {
  backend_->FailNextCommits(1, absl::UnavailableError("database is locked"));
  EXPECT_FALSE(store_->Put({"job", "a", "1"}).ok());
  EXPECT_FALSE(store_->WriteHealth().ok());
  // Nothing was committed since: a failure this old says nothing of now.
  clock_.Advance(absl::Seconds(10));
  EXPECT_TRUE(store_->WriteHealth().ok());
}

TEST_F(KvStoreTest, LeaseExpiry_CommitFails_RetriedAtLaterTick) {
  auto lease = store_->LeaseGrant(100);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(store_->Put({"job", "a", "1", lease->lease}).ok());
  backend_->FailNextCommits(1);
  clock_.Advance(absl::Milliseconds(100));
  store_->Tick();
  (void)store_->Put({"job", "sync", "x"});  // fails too if it shared the batch
  EXPECT_TRUE(store_->Get({"job", "a"}).ok());
  clock_.Advance(absl::Milliseconds(100));
  store_->Tick();
  ASSERT_TRUE(store_->Put({"job", "sync", "y"}).ok());
  EXPECT_EQ(store_->Get({"job", "a"}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(KvStoreTest, Status_AfterWrites_CountsKeysLeasesWatchers) {
  ASSERT_TRUE(store_->Put({"job", "a", "1"}).ok());
  ASSERT_TRUE(store_->LeaseGrant(1000).ok());
  const KvStoreStatus status = store_->Status();
  EXPECT_EQ(status.revision, 2);
  EXPECT_EQ(status.keys, 1);
  EXPECT_EQ(status.leases, 1);
  EXPECT_EQ(status.watchers, 0);
}

TEST_F(KvStoreTest, PutAsync_SlowCallback_CommitterKeepsCommitting) {
  absl::Notification release, first_called;
  store_->PutAsync({"job", "a", "1"}, [&](absl::StatusOr<PutResult> r) {
    EXPECT_TRUE(r.ok());
    first_called.Notify();
    release.WaitForNotification();  // holds the delivery thread
  });
  ASSERT_TRUE(first_called.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::Notification second_done;
  store_->PutAsync({"job", "b", "2"}, [&](absl::StatusOr<PutResult> r) {
    EXPECT_TRUE(r.ok());
    second_done.Notify();
  });
  // The second write is committed and readable while the first reply is
  // still being delivered; its own reply waits behind the first (in order).
  ASSERT_TRUE(backend_->AwaitCommits(2, absl::Seconds(30)));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (store_->Status().revision < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));  // state applied right after Commit
  }
  EXPECT_EQ(store_->Status().revision, 2);
  EXPECT_TRUE(store_->Get({"job", "b"}).ok());
  EXPECT_FALSE(second_done.HasBeenNotified());
  release.Notify();
  EXPECT_TRUE(second_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

TEST_F(KvStoreTest, Shutdown_QueuedWrites_AllCallbacksRunBeforeItReturns) {
  std::atomic<int> finished{0};
  for (int i = 0; i < 500; ++i) {
    store_->PutAsync({"job", "k" + std::to_string(i), "v"}, [&](absl::StatusOr<PutResult> r) {
      EXPECT_TRUE(r.ok()) << r.status();
      finished.fetch_add(1);
    });
  }
  store_->Shutdown();
  EXPECT_EQ(finished.load(), 500);
}

// Get at a revision (ddpctl kv get --rev): what the key held then, from the
// current state and the changes after the compacted revision.
class KvStoreHistoricGetTest : public KvStoreTest {
 protected:
  absl::StatusOr<GetResult> GetAt(const std::string& key, Revision revision) {
    GetRequest get;
    get.ns = "job";
    get.key = key;
    get.revision = revision;
    return store_->Get(get);
  }
};

TEST_F(KvStoreHistoricGetTest, Get_EachRevision_ValueThen) {
  ASSERT_EQ(store_->Put({"job", "k", "v1"})->revision, 1);
  ASSERT_EQ(store_->Put({"job", "k2", "sibling"})->revision, 2);  // a longer key: not k
  ASSERT_EQ(store_->Put({"job", "k", "v2"})->revision, 3);
  ASSERT_EQ(store_->Delete({"job", "k"})->revision, 4);
  ASSERT_EQ(store_->Put({"job", "k", "v3"})->revision, 5);
  EXPECT_EQ(GetAt("k", 1)->kv.value, "v1");
  EXPECT_EQ(GetAt("k", 2)->kv.value, "v1");
  EXPECT_EQ(GetAt("k", 3)->kv.value, "v2");
  EXPECT_EQ(GetAt("k", 3)->kv.mod_revision, 3);
  EXPECT_EQ(GetAt("k", 3)->revision, 5);  // the store's, as for a current read
  absl::StatusOr<GetResult> deleted = GetAt("k", 4);
  EXPECT_EQ(deleted.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(deleted.status().message().find("deleted at revision 4"), std::string::npos)
      << deleted.status();
  EXPECT_EQ(GetAt("k", 5)->kv.value, "v3");
  EXPECT_EQ(GetAt("k", 0)->kv.value, "v3");                                // 0: now
  EXPECT_EQ(GetAt("k2", 1).status().code(), absl::StatusCode::kNotFound);  // created at 2
  EXPECT_EQ(GetAt("k2", 5)->kv.value, "sibling");
}

TEST_F(KvStoreHistoricGetTest, Get_FutureOrNegative_Refused) {
  ASSERT_TRUE(store_->Put({"job", "k", "v1"}).ok());
  absl::StatusOr<GetResult> future = GetAt("k", 2);
  EXPECT_EQ(future.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(future.status().message().find("the store is at revision 1"), std::string::npos)
      << future.status();
  EXPECT_EQ(GetAt("k", -1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KvStoreHistoricGetTest, Get_Compacted_OutOfRangeUnlessKnowable) {
  ASSERT_TRUE(store_->Put({"job", "k", "v1"}).ok());         // 1
  ASSERT_TRUE(store_->Put({"job", "k", "v2"}).ok());         // 2
  ASSERT_TRUE(store_->Put({"job", "steady", "same"}).ok());  // 3
  ASSERT_TRUE(store_->Put({"job", "k", "v3"}).ok());         // 4
  ASSERT_TRUE(store_->Put({"job", "late", "new"}).ok());     // 5
  ASSERT_TRUE(store_->Compact(4).ok());                      // history kept from 3 on
  const Revision compacted = store_->Status().compacted_revision;
  ASSERT_EQ(compacted, 3);
  absl::StatusOr<GetResult> gone = GetAt("k", 1);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(gone.status().message().find("compacted"), std::string::npos) << gone.status();
  // k's value at 3 (v2, written at 2) changed at 4: no longer kept.
  absl::StatusOr<GetResult> unknown = GetAt("k", 3);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(unknown.status().message().find("read at revision 4 or later"), std::string::npos)
      << unknown.status();
  EXPECT_EQ(GetAt("k", 4)->kv.value, "v3");
  // Unchanged since: the current value was the value then.
  EXPECT_EQ(GetAt("steady", 3)->kv.value, "same");
  // Created after: absent then.
  EXPECT_EQ(GetAt("late", 4).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ddp::kv
