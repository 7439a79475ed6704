// Restart: close the store and reopen it on the same SQLite file. Keys,
// revision, leases (with a fresh full TTL), lease ids and the watch history all
// survive.

#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/clock.h"
#include "coordinator/commit/testing/kv_store_with_loop.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/kv/testing/watch_test_util.h"
#include "coordinator/storage/sqlite_kv_backend.h"
#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

class KvStoreRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("TEST_TMPDIR");
    path_ = std::string(dir ? dir : "/tmp") + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
    std::remove(path_.c_str());
    Reopen();
  }

  void Reopen() {
    store_.reset();  // closes the database
    auto backend = SqliteKvBackend::Open(path_);
    ASSERT_TRUE(backend.ok()) << backend.status();
    KvStoreOptions options;
    options.lease_ids = lease_ids_;  // a copy: a sequence starts again at each open
    auto store = commit::KvStoreWithLoop::Open(*std::move(backend), clock_, options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  FakeClock clock_;
  std::string path_;
  LeaseIdSource lease_ids_;  // null: random ids
  commit::KvStoreWithLoop store_;
};

TEST_F(KvStoreRestartTest, Reopen_KeysAndRevision_Survive) {
  ASSERT_TRUE(store_->Put({"job", "a", "1"}).ok());
  ASSERT_TRUE(store_->Put({"job", "a", "2"}).ok());
  ASSERT_TRUE(store_->Put({"job", "b", "x"}).ok());
  ASSERT_TRUE(store_->Delete({"job", "b"}).ok());
  Reopen();
  EXPECT_EQ(store_->Status().revision, 4);
  auto got = store_->Get({"job", "a"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->kv.value, "2");
  EXPECT_EQ(got->kv.version, 2);
  EXPECT_EQ(got->kv.create_revision, 1);
  EXPECT_EQ(store_->Get({"job", "b"}).status().code(), absl::StatusCode::kNotFound);
  auto next = store_->Put({"job", "c", "y"});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->revision, 5);
}

TEST_F(KvStoreRestartTest, Reopen_WatchFromOldRevision_ReplaysHistoryInOrder) {
  ASSERT_TRUE(store_->Put({"job", "a", "1"}).ok());
  ASSERT_TRUE(store_->Put({"job", "b", "2"}).ok());
  ASSERT_TRUE(store_->Delete({"job", "a"}).ok());
  Reopen();
  auto id = store_->Watch({"job", "", 2}, std::make_shared<testing::CountingSink>());
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(store_->Put({"job", "c", "3"}).ok());
  std::vector<Event> events;
  ASSERT_TRUE(testing::Drain(*store_, *id, &events).ok());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kv.key, "b");
  EXPECT_EQ(events[0].revision(), 2);
  EXPECT_EQ(events[1].type, EventType::kDelete);
  EXPECT_EQ(events[1].revision(), 3);
  EXPECT_EQ(events[2].kv.key, "c");
  EXPECT_EQ(events[2].revision(), 4);
}

TEST_F(KvStoreRestartTest, Reopen_Lease_SurvivesWithFullTtlAgain) {
  auto lease = store_->LeaseGrant(1000);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(store_->Put({"job", "owned", "v", lease->lease}).ok());
  clock_.Advance(absl::Milliseconds(900));
  Reopen();  // the lease gets 1000 ms from now, not the 100 ms it had left
  EXPECT_EQ(store_->Status().leases, 1);
  clock_.Advance(absl::Milliseconds(999));
  store_->Tick();
  ASSERT_TRUE(store_->Put({"job", "sync", "1"}).ok());
  EXPECT_TRUE(store_->Get({"job", "owned"}).ok());
  clock_.Advance(absl::Milliseconds(1));
  store_->Tick();
  ASSERT_TRUE(store_->Put({"job", "sync", "2"}).ok());
  EXPECT_EQ(store_->Get({"job", "owned"}).status().code(), absl::StatusCode::kNotFound);
}

// Random ids could not show a reissued id: a sequence from 1 at every open
// can, and the loaded live lease makes the store draw again.
TEST_F(KvStoreRestartTest, Reopen_LiveLeaseId_NotIssuedAgain) {
  lease_ids_ = [next = LeaseId{1}]() mutable { return next++; };
  Reopen();
  auto first = store_->LeaseGrant(60'000);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->lease, 1);
  Reopen();
  auto second = store_->LeaseGrant(60'000);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->lease, 2);
  EXPECT_EQ(store_->Status().leases, 2);
}

TEST_F(KvStoreRestartTest, Reopen_LeaseOwner_Survives) {
  auto lease = store_->LeaseGrant(60'000, "job-a");
  ASSERT_TRUE(lease.ok()) << lease.status();
  PutRequest put{"job-a", "k", "v", lease->lease};
  put.lease_caller = LeaseCaller::OfNamespace("job-a");
  ASSERT_TRUE(store_->Put(put).ok());
  EXPECT_EQ(store_->Status().keys, 1);  // the owner key is not counted
  Reopen();
  const LeaseCaller job_b = LeaseCaller::OfNamespace("job-b");
  EXPECT_EQ(store_->LeaseKeepAlive(lease->lease, job_b).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store_->LeaseRevoke(lease->lease, job_b).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(store_->Get({"job-a", "k"}).ok());
  EXPECT_TRUE(store_->LeaseKeepAlive(lease->lease, LeaseCaller::OfNamespace("job-a")).ok());
  EXPECT_EQ(store_->Status().keys, 1);
  auto revoked = store_->LeaseRevoke(lease->lease, LeaseCaller::OfNamespace("job-a"));
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->deleted, 1);
  Reopen();  // the owner key went with the lease
  EXPECT_EQ(store_->Status().keys, 0);
  EXPECT_EQ(store_->Status().leases, 0);
}

// A store written before leases had owners: leases 1, 2 and 3 with no owner
// key; 1 holds keys of job-a only, 2 none, 3 keys of job-a and job-b.
TEST_F(KvStoreRestartTest, Reopen_LeasesWithoutOwnerKey_OwnerFromTheirKeys) {
  store_.reset();
  {
    auto backend = SqliteKvBackend::Open(path_);
    ASSERT_TRUE(backend.ok()) << backend.status();
    KvWriteBatch batch;
    batch.revision = 3;
    batch.lease_grants = {{1, 60'000}, {2, 60'000}, {3, 60'000}};
    batch.next_lease_id = 4;
    Revision revision = 0;
    for (const auto& [ns, key, lease] : std::vector<std::tuple<std::string, std::string, LeaseId>>{
             {"job-a", "one", 1}, {"job-a", "three", 3}, {"job-b", "three", 3}}) {
      KeyValue kv{ns, key, "v", ++revision, revision, 1, lease};
      batch.upserts.push_back(kv);
      batch.events.push_back(Event{EventType::kPut, kv});
    }
    ASSERT_TRUE((*backend)->Commit(batch).ok());
  }
  Reopen();
  const LeaseCaller job_a = LeaseCaller::OfNamespace("job-a");
  const LeaseCaller job_b = LeaseCaller::OfNamespace("job-b");
  EXPECT_TRUE(store_->LeaseKeepAlive(1, job_a).ok());
  EXPECT_EQ(store_->LeaseKeepAlive(1, job_b).status().code(), absl::StatusCode::kPermissionDenied);
  for (LeaseId ownerless : {2, 3}) {
    EXPECT_EQ(store_->LeaseKeepAlive(ownerless, job_a).status().code(),
              absl::StatusCode::kPermissionDenied);
    EXPECT_TRUE(store_->LeaseKeepAlive(ownerless, LeaseCaller::Anyone()).ok());
  }
  // The ids stay valid: the admin revokes 3 and its keys go.
  auto revoked = store_->LeaseRevoke(3);
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->deleted, 2);
}

TEST_F(KvStoreRestartTest, Reopen_CompactedHistory_StillOutOfRange) {
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(store_->Put({"job", "k", std::to_string(i)}).ok());
  ASSERT_TRUE(store_->Compact(3).ok());
  Reopen();
  EXPECT_EQ(store_->Status().compacted_revision, 2);
  EXPECT_EQ(
      store_->Watch({"job", "", 2}, std::make_shared<testing::CountingSink>()).status().code(),
      absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(store_->Watch({"job", "", 3}, std::make_shared<testing::CountingSink>()).ok());
}

}  // namespace
}  // namespace ddp::kv
