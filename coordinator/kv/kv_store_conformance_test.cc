// The conformance suite of the key-value semantics, run against every KvBackend
// (InMemoryKvBackend and SqliteKvBackend): keys, conditions, ranges, deletes,
// compare-and-set, add, wait, revisions and input limits. Watches and leases
// are in kv_store_watch_lease_conformance_test.cc.

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "coordinator/kv/testing/backend_factories.h"
#include "coordinator/kv/testing/kv_store_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::kv::testing {
namespace {

using ::testing::HasSubstr;

template <typename Factory>
using KvStoreKeysTest = KvStoreConformanceTest<Factory>;
using Backends = ::testing::Types<InMemoryBackendFactory, SqliteBackendFactory>;
TYPED_TEST_SUITE(KvStoreKeysTest, Backends);

TYPED_TEST(KvStoreKeysTest, Put_NewKey_CreatesVersionOneAtNewRevision) {
  const PutResult put = this->MustPut("a", "1");
  EXPECT_EQ(put.revision, 1);
  auto got = this->store_->Get({"job", "a"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->kv.value, "1");
  EXPECT_EQ(got->kv.create_revision, 1);
  EXPECT_EQ(got->kv.mod_revision, 1);
  EXPECT_EQ(got->kv.version, 1);
  EXPECT_EQ(got->revision, 1);
}

TYPED_TEST(KvStoreKeysTest, Put_Overwrite_KeepsCreateRevisionAndBumpsVersion) {
  this->MustPut("a", "1");
  this->MustPut("b", "x");
  const PutResult put = this->MustPut("a", "2");
  EXPECT_EQ(put.revision, 3);
  auto got = this->store_->Get({"job", "a"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kv.value, "2");
  EXPECT_EQ(got->kv.create_revision, 1);
  EXPECT_EQ(got->kv.mod_revision, 3);
  EXPECT_EQ(got->kv.version, 2);
}

TYPED_TEST(KvStoreKeysTest, Get_MissingKey_NotFound) {
  auto got = this->store_->Get({"job", "nope"});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(got.status().message(), HasSubstr("nope"));
}

TYPED_TEST(KvStoreKeysTest, Put_NamespacesAreSeparate_SameKeyIndependent) {
  this->MustPut("k", "one", 0, "job1");
  this->MustPut("k", "two", 0, "job2");
  EXPECT_EQ(this->store_->Get({"job1", "k"})->kv.value, "one");
  EXPECT_EQ(this->store_->Get({"job2", "k"})->kv.value, "two");
}

TYPED_TEST(KvStoreKeysTest, Put_IfAbsentOnExistingKey_FailedPrecondition) {
  this->MustPut("a", "1");
  PutRequest request{"job", "a", "2"};
  request.condition = PutRequest::Condition::kAbsent;
  auto put = this->store_->Put(request);
  EXPECT_EQ(put.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(this->store_->Get({"job", "a"})->kv.value, "1");
  EXPECT_EQ(this->store_->Status().revision, 1);
}

TYPED_TEST(KvStoreKeysTest, Put_ExpectedModRevision_OnlyMatchingRevisionWins) {
  this->MustPut("a", "1");
  PutRequest stale{"job", "a", "stale"};
  stale.condition = PutRequest::Condition::kExpectedModRevision;
  stale.expected_mod_revision = 7;
  auto rejected = this->store_->Put(stale);
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(rejected.status().message(), HasSubstr("expected 7"));
  PutRequest fresh{"job", "a", "fresh"};
  fresh.condition = PutRequest::Condition::kExpectedModRevision;
  fresh.expected_mod_revision = 1;
  ASSERT_TRUE(this->store_->Put(fresh).ok());
  PutRequest absent{"job", "new", "v"};
  absent.condition = PutRequest::Condition::kExpectedModRevision;
  absent.expected_mod_revision = 0;
  EXPECT_TRUE(this->store_->Put(absent).ok());
  EXPECT_EQ(this->store_->Get({"job", "a"})->kv.value, "fresh");
}

TYPED_TEST(KvStoreKeysTest, Put_ReturnPrevious_ReturnsOldRecord) {
  this->MustPut("a", "old");
  PutRequest request{"job", "a", "new"};
  request.return_previous = true;
  auto put = this->store_->Put(request);
  ASSERT_TRUE(put.ok());
  ASSERT_TRUE(put->previous.has_value());
  EXPECT_EQ(put->previous->value, "old");
  EXPECT_EQ(put->previous->mod_revision, 1);
}

TYPED_TEST(KvStoreKeysTest, Range_PrefixWithLimit_PagesInKeyOrder) {
  for (const char* key : {"p/c", "p/a", "q/z", "p/b", "o/x"}) this->MustPut(key, key);
  RangeRequest request;
  request.ns = "job";
  request.prefix = "p/";
  request.limit = 2;
  auto page1 = this->store_->Range(request);
  ASSERT_TRUE(page1.ok());
  ASSERT_EQ(page1->kvs.size(), 2u);
  EXPECT_EQ(page1->kvs[0].key, "p/a");
  EXPECT_EQ(page1->kvs[1].key, "p/b");
  EXPECT_TRUE(page1->more);
  EXPECT_EQ(page1->revision, 5);
  request.start_after = page1->next_start_after;
  auto page2 = this->store_->Range(request);
  ASSERT_TRUE(page2.ok());
  ASSERT_EQ(page2->kvs.size(), 1u);
  EXPECT_EQ(page2->kvs[0].key, "p/c");
  EXPECT_EQ(page2->kvs[0].value, "p/c");
  EXPECT_FALSE(page2->more);
}

TYPED_TEST(KvStoreKeysTest, Range_KeysOnly_ReturnsNoValues) {
  this->MustPut("a", "value");
  RangeRequest request;
  request.ns = "job";
  request.keys_only = true;
  auto range = this->store_->Range(request);
  ASSERT_TRUE(range.ok());
  ASSERT_EQ(range->kvs.size(), 1u);
  EXPECT_EQ(range->kvs[0].key, "a");
  EXPECT_EQ(range->kvs[0].value, "");
}

TYPED_TEST(KvStoreKeysTest, Range_LimitAboveMaximum_ResourceExhausted) {
  RangeRequest request;
  request.ns = "job";
  request.limit = 1'000'000;
  EXPECT_EQ(this->store_->Range(request).status().code(), absl::StatusCode::kResourceExhausted);
}

TYPED_TEST(KvStoreKeysTest, Delete_ExistingKey_RemovesAtNewRevision) {
  this->MustPut("a", "1");
  auto deleted = this->store_->Delete({"job", "a"});
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->deleted, 1);
  EXPECT_EQ(deleted->revision, 2);
  EXPECT_EQ(this->store_->Get({"job", "a"}).status().code(), absl::StatusCode::kNotFound);
}

TYPED_TEST(KvStoreKeysTest, Delete_MissingKey_ZeroAtCurrentRevision) {
  this->MustPut("a", "1");
  auto deleted = this->store_->Delete({"job", "b"});
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->deleted, 0);
  EXPECT_EQ(deleted->revision, 1);
}

TYPED_TEST(KvStoreKeysTest, Delete_Prefix_RemovesAllMatchingInOneRevision) {
  for (const char* key : {"p/a", "p/b", "q"}) this->MustPut(key, "v");
  auto deleted = this->store_->Delete({"job", "p/", /*prefix=*/true});
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->deleted, 2);
  EXPECT_EQ(deleted->revision, 4);
  EXPECT_EQ(this->store_->Status().keys, 1);
}

TYPED_TEST(KvStoreKeysTest, Put_AfterDelete_StartsNewLife) {
  this->MustPut("a", "1");
  ASSERT_TRUE(this->store_->Delete({"job", "a"}).ok());
  this->MustPut("a", "2");
  auto got = this->store_->Get({"job", "a"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kv.create_revision, 3);
  EXPECT_EQ(got->kv.version, 1);
}

TYPED_TEST(KvStoreKeysTest, CompareAndSet_MissingKeyEmptyExpected_Sets) {
  auto cas = this->store_->CompareAndSet({"job", "k", "", "v1"});
  ASSERT_TRUE(cas.ok());
  EXPECT_TRUE(cas->swapped);
  EXPECT_EQ(cas->value, "v1");
  EXPECT_EQ(this->store_->Get({"job", "k"})->kv.value, "v1");
}

TYPED_TEST(KvStoreKeysTest, CompareAndSet_Mismatch_ReturnsCurrentValueUnchanged) {
  this->MustPut("k", "current");
  auto cas = this->store_->CompareAndSet({"job", "k", "other", "new"});
  ASSERT_TRUE(cas.ok());
  EXPECT_FALSE(cas->swapped);
  EXPECT_EQ(cas->value, "current");
  EXPECT_EQ(cas->revision, 1);
  auto swapped = this->store_->CompareAndSet({"job", "k", "current", "new"});
  ASSERT_TRUE(swapped.ok());
  EXPECT_TRUE(swapped->swapped);
  EXPECT_EQ(swapped->value, "new");
  EXPECT_EQ(swapped->revision, 2);
}

TYPED_TEST(KvStoreKeysTest, Add_MissingAndExisting_Accumulates) {
  auto first = this->store_->Add({"job", "n", 5});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->value, 5);
  auto second = this->store_->Add({"job", "n", -7});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->value, -2);
  EXPECT_EQ(this->store_->Get({"job", "n"})->kv.value, "-2");
}

TYPED_TEST(KvStoreKeysTest, Add_NonIntegerValue_InvalidArgument) {
  this->MustPut("n", "abc");
  EXPECT_EQ(this->store_->Add({"job", "n", 1}).status().code(), absl::StatusCode::kInvalidArgument);
}

TYPED_TEST(KvStoreKeysTest, Add_Overflow_OutOfRange) {
  this->MustPut("n", "9223372036854775807");
  EXPECT_EQ(this->store_->Add({"job", "n", 1}).status().code(), absl::StatusCode::kOutOfRange);
}

TYPED_TEST(KvStoreKeysTest, Add_ConcurrentAdds_NoLostUpdate) {
  constexpr int kThreads = 8, kAddsPerThread = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this] {
      for (int i = 0; i < kAddsPerThread; ++i) ASSERT_TRUE(this->store_->Add({"job", "c", 1}).ok());
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(this->store_->Get({"job", "c"})->kv.value, std::to_string(kThreads * kAddsPerThread));
  EXPECT_EQ(this->store_->Status().revision, kThreads * kAddsPerThread);
}

TYPED_TEST(KvStoreKeysTest, Wait_KeysAlreadyExist_ReturnsAtOnce) {
  this->MustPut("a", "1");
  auto waited = this->store_->Wait({"job", {"a"}, 1000});
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->revision, 1);
}

TYPED_TEST(KvStoreKeysTest, Wait_KeysPutLater_CompletesAfterLastKey) {
  absl::Notification done;
  absl::StatusOr<WaitResult> result;
  this->store_->WaitAsync({"job", {"a", "b"}, 10000}, [&](absl::StatusOr<WaitResult> r) {
    result = r;
    done.Notify();
  });
  this->MustPut("a", "1");
  EXPECT_FALSE(done.HasBeenNotified());
  this->MustPut("b", "2");
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(result->revision, 2);
}

TYPED_TEST(KvStoreKeysTest, Wait_Timeout_DeadlineExceededNamingMissingKey) {
  this->MustPut("a", "1");
  absl::Notification done;
  absl::Status status;
  this->store_->WaitAsync({"job", {"a", "missing-key"}, 500}, [&](absl::StatusOr<WaitResult> r) {
    status = r.status();
    done.Notify();
  });
  this->clock_.Advance(absl::Milliseconds(499));
  this->store_->Tick();
  EXPECT_FALSE(done.HasBeenNotified());
  this->clock_.Advance(absl::Milliseconds(1));
  this->store_->Tick();
  ASSERT_TRUE(done.HasBeenNotified());
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(), HasSubstr("missing-key"));
}

TYPED_TEST(KvStoreKeysTest, Put_OversizedKey_ResourceExhaustedNamingSizeAndLimit) {
  const std::string key(5000, 'k');
  auto put = this->store_->Put({"job", key, "v"});
  EXPECT_EQ(put.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(put.status().message(), HasSubstr("5000"));
  EXPECT_THAT(put.status().message(), HasSubstr("4096"));
}

TYPED_TEST(KvStoreKeysTest, Put_OversizedValue_ResourceExhaustedNamingSizeAndLimit) {
  auto put = this->store_->Put({"job", "k", std::string((1 << 20) + 1, 'v')});
  EXPECT_EQ(put.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(put.status().message(), HasSubstr("1048577"));
  EXPECT_THAT(put.status().message(), HasSubstr("1048576"));
}

TYPED_TEST(KvStoreKeysTest, Put_BadNamespace_InvalidArgument) {
  for (const std::string& ns : {std::string(""), std::string("a/b"), std::string(129, 'n')}) {
    auto put = this->store_->Put({ns, "k", "v"});
    EXPECT_EQ(put.status().code(), absl::StatusCode::kInvalidArgument) << ns;
  }
  EXPECT_EQ(this->store_->Put({"job", "", "v"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TYPED_TEST(KvStoreKeysTest, PutAsync_ManyConcurrentWrites_UniqueContiguousRevisions) {
  constexpr int kWrites = 300;
  absl::Mutex mu;
  std::vector<Revision> revisions;
  absl::Notification all_done;
  for (int i = 0; i < kWrites; ++i) {
    this->store_->PutAsync({"job", "k" + std::to_string(i), "v"}, [&](absl::StatusOr<PutResult> r) {
      ASSERT_TRUE(r.ok()) << r.status();
      bool last = false;
      {
        absl::MutexLock lock(&mu);
        revisions.push_back(r->revision);
        last = revisions.size() == kWrites;
      }
      if (last) all_done.Notify();
    });
  }
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  std::sort(revisions.begin(), revisions.end());
  for (int i = 0; i < kWrites; ++i) EXPECT_EQ(revisions[i], i + 1);
  EXPECT_EQ(this->store_->Status().keys, kWrites);
}

}  // namespace
}  // namespace ddp::kv::testing
