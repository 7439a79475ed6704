#include "coordinator/kv/write_batch_builder.h"

#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1000);

// Lease ids first, first + 1, ... (the store draws random ones).
LeaseIdSource Sequence(LeaseId first) {
  return [next = first]() mutable { return next++; };
}

class WriteBatchBuilderTest : public ::testing::Test {
 protected:
  KeySpace keys_;
  LeaseTable leases_;
  LeaseIdSource ids_ = Sequence(1);
};

TEST_F(WriteBatchBuilderTest, Apply_LaterWritesSeeEarlierOnes_InOneBatch) {
  WriteBatchBuilder builder(keys_, leases_, 10, ids_, 100);
  ASSERT_TRUE(builder.Apply(PutRequest{"ns", "a", "1"}).ok());
  PutRequest conditional{"ns", "a", "2"};
  conditional.condition = PutRequest::Condition::kExpectedModRevision;
  conditional.expected_mod_revision = 11;
  auto second = builder.Apply(conditional);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->revision, 12);
  auto add = builder.Apply(AddRequest{"ns", "a", 3});
  ASSERT_TRUE(add.ok());
  EXPECT_EQ(add->number, 5);
  const KvWriteBatch batch = builder.Build();
  EXPECT_EQ(batch.revision, 13);
  ASSERT_EQ(batch.upserts.size(), 1u);
  EXPECT_EQ(batch.upserts[0].value, "5");
  EXPECT_EQ(batch.upserts[0].version, 3);
  EXPECT_EQ(batch.upserts[0].create_revision, 11);
  EXPECT_EQ(batch.events.size(), 3u);
}

TEST_F(WriteBatchBuilderTest, Apply_FailedCondition_TakesNoRevision) {
  WriteBatchBuilder builder(keys_, leases_, 0, ids_, 100);
  ASSERT_TRUE(builder.Apply(PutRequest{"ns", "a", "1"}).ok());
  PutRequest absent{"ns", "a", "2"};
  absent.condition = PutRequest::Condition::kAbsent;
  EXPECT_EQ(builder.Apply(absent).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(builder.revision(), 1);
}

TEST_F(WriteBatchBuilderTest, LeaseGrantedAndUsedInBatch_RevokeDeletesKeys) {
  LeaseIdSource from_5 = Sequence(5);
  WriteBatchBuilder builder(keys_, leases_, 0, from_5, 100);
  auto lease = builder.Apply(LeaseGrantOp{1000});
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->lease, 5);
  PutRequest put{"ns", "k", "v", lease->lease};
  ASSERT_TRUE(builder.Apply(put).ok());
  auto revoked = builder.Apply(LeaseRevokeOp{5, false});
  ASSERT_TRUE(revoked.ok());
  EXPECT_EQ(revoked->deleted, 1);
  EXPECT_EQ(builder.Apply(put).status().code(), absl::StatusCode::kNotFound);
  const KvWriteBatch batch = builder.Build();
  EXPECT_TRUE(batch.upserts.empty());
  EXPECT_TRUE(batch.deletes.empty());  // never committed, nothing to delete
  EXPECT_TRUE(batch.lease_grants.empty());
  EXPECT_EQ(batch.next_lease_id, 0);  // ids are drawn, not counted
}

TEST_F(WriteBatchBuilderTest, ApplyTo_CommittedState_UpdatesKeysAndLeases) {
  {
    WriteBatchBuilder builder(keys_, leases_, 0, ids_, 100);
    ASSERT_TRUE(builder.Apply(LeaseGrantOp{1000}).ok());
    ASSERT_TRUE(builder.Apply(PutRequest{"ns", "k", "v", 1}).ok());
    KvWriteBatch batch = builder.Build();
    builder.ApplyTo(batch, keys_, leases_, kNow);
  }
  EXPECT_EQ(leases_.Keys(1).size(), 1u);
  WriteBatchBuilder builder(keys_, leases_, 2, ids_, 100);
  auto deleted = builder.Apply(DeleteRequest{"ns", "", true});
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->deleted, 1);
  KvWriteBatch batch = builder.Build();
  EXPECT_EQ(batch.deletes.size(), 1u);
  builder.ApplyTo(batch, keys_, leases_, kNow);
  EXPECT_EQ(keys_.size(), 0u);
  EXPECT_TRUE(leases_.Keys(1).empty());
}

TEST_F(WriteBatchBuilderTest, LeaseGrant_OverLimit_ResourceExhausted) {
  WriteBatchBuilder builder(keys_, leases_, 0, ids_, 1);
  ASSERT_TRUE(builder.Apply(LeaseGrantOp{1000}).ok());
  EXPECT_EQ(builder.Apply(LeaseGrantOp{1000}).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(WriteBatchBuilderTest, ApplyRvalue_MovesStringsOnceIntoTheEvent) {
  WriteBatchBuilder builder(keys_, leases_, 0, ids_, 100);
  const std::string big(1000, 'v');  // beyond the small-string buffer
  PutRequest put{"ns", "a-rather-long-key-name", big};
  const char* value_bytes = put.value.data();
  ASSERT_TRUE(builder.Apply(WriteOp(std::move(put))).ok());
  KvWriteBatch batch = builder.Build();
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_EQ(batch.events[0].kv.value, big);
  // The variant's move kept the buffer: the event owns the request's bytes.
  EXPECT_EQ(batch.events[0].kv.value.data(), value_bytes);
  EXPECT_EQ(builder.Apply(PutRequest{"ns", "b", "1"}).status().code(),
            absl::StatusCode::kFailedPrecondition);  // Apply after Build
}

TEST_F(WriteBatchBuilderTest, ApplyTo_Overwrite_MovesLeaseAndReplacesValue) {
  {
    WriteBatchBuilder builder(keys_, leases_, 0, ids_, 100);
    ASSERT_TRUE(builder.Apply(LeaseGrantOp{1000}).ok());
    ASSERT_TRUE(builder.Apply(LeaseGrantOp{1000}).ok());
    ASSERT_TRUE(builder.Apply(PutRequest{"ns", "k", "v1", 1}).ok());
    KvWriteBatch batch = builder.Build();
    builder.ApplyTo(batch, keys_, leases_, kNow);
  }
  WriteBatchBuilder builder(keys_, leases_, 3, ids_, 100);
  ASSERT_TRUE(builder.Apply(PutRequest{"ns", "k", "v2", 2}).ok());
  KvWriteBatch batch = builder.Build();
  builder.ApplyTo(batch, keys_, leases_, kNow);
  EXPECT_TRUE(leases_.Keys(1).empty());
  EXPECT_EQ(leases_.Keys(2).size(), 1u);
  ASSERT_NE(keys_.Find("ns", "k"), nullptr);
  EXPECT_EQ(keys_.Find("ns", "k")->value, "v2");
  EXPECT_EQ(keys_.Find("ns", "k")->version, 2);
}

TEST_F(WriteBatchBuilderTest, LeaseGrant_IdInUse_DrawsAgain) {
  leases_.Grant(1, 1000, "", kNow);
  std::vector<LeaseId> draws = {1, 0, -3, 1, 9};
  size_t next = 0;
  LeaseIdSource source = [&] { return draws[next++]; };
  WriteBatchBuilder builder(keys_, leases_, 0, source, 100);
  auto lease = builder.Apply(LeaseGrantOp{1000});
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->lease, 9);  // 1 is taken, 0 and -3 are not ids
  next = 3;                    // 1 again, then 9 (granted in this batch)
  draws.push_back(9);
  draws.push_back(10);
  auto second = builder.Apply(LeaseGrantOp{1000});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->lease, 10);
}

TEST_F(WriteBatchBuilderTest, LeaseGrant_SourceGivesOnlyTakenIds_InternalError) {
  leases_.Grant(1, 1000, "", kNow);
  LeaseIdSource stuck = [] { return LeaseId{1}; };
  WriteBatchBuilder builder(keys_, leases_, 0, stuck, 100);
  EXPECT_EQ(builder.Apply(LeaseGrantOp{1000}).status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(builder.empty());
}

TEST_F(WriteBatchBuilderTest, LeaseGrant_WithOwner_WritesOwnerKeyAttachedToLease) {
  WriteBatchBuilder builder(keys_, leases_, 0, ids_, 100);
  auto lease = builder.Apply(LeaseGrantOp{1000, "job-a"});
  ASSERT_TRUE(lease.ok()) << lease.status();
  KvWriteBatch batch = builder.Build();
  ASSERT_EQ(batch.upserts.size(), 1u);
  EXPECT_EQ(batch.upserts[0].ns, kLeaseOwnerNamespace);
  EXPECT_EQ(batch.upserts[0].key, LeaseOwnerKey(lease->lease));
  EXPECT_EQ(batch.upserts[0].value, "job-a");
  EXPECT_EQ(batch.upserts[0].lease, lease->lease);
  EXPECT_EQ(batch.upserts[0].mod_revision, lease->revision);
  ASSERT_EQ(batch.events.size(), 1u);  // durable with the grant in every backend
  builder.ApplyTo(batch, keys_, leases_, kNow);
  EXPECT_EQ(leases_.Owner(lease->lease), "job-a");
  EXPECT_EQ(leases_.Keys(lease->lease).size(), 1u);
}

TEST_F(WriteBatchBuilderTest, Put_OtherJobsLease_PermissionDeniedNothingWritten) {
  leases_.Grant(1, 1000, "job-a", kNow);
  WriteBatchBuilder builder(keys_, leases_, 0, ids_, 100);
  PutRequest put{"job-b", "k", "v", 1};
  put.lease_caller = LeaseCaller::OfNamespace("job-b");
  EXPECT_EQ(builder.Apply(put).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(builder.empty());
  put = PutRequest{"job-a", "k", "v", 1};
  put.lease_caller = LeaseCaller::OfNamespace("job-a");
  EXPECT_TRUE(builder.Apply(put).ok());
  put = PutRequest{"job-b", "k", "v", 1};  // the admin may attach any key
  EXPECT_TRUE(builder.Apply(put).ok());
}

TEST_F(WriteBatchBuilderTest, Put_OwnerlessLeaseByJob_PermissionDenied) {
  leases_.Grant(1, 1000, "", kNow);
  WriteBatchBuilder builder(keys_, leases_, 0, ids_, 100);
  PutRequest put{"job-b", "k", "v", 1};
  put.lease_caller = LeaseCaller::OfNamespace("job-b");
  EXPECT_EQ(builder.Apply(put).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(WriteBatchBuilderTest, LeaseRevoke_OtherJob_PermissionDeniedKeysKept) {
  {
    WriteBatchBuilder builder(keys_, leases_, 0, ids_, 100);
    auto lease = builder.Apply(LeaseGrantOp{1000, "job-a"});
    ASSERT_TRUE(lease.ok());
    ASSERT_TRUE(builder.Apply(PutRequest{"job-a", "k", "v", lease->lease}).ok());
    KvWriteBatch batch = builder.Build();
    builder.ApplyTo(batch, keys_, leases_, kNow);
  }
  WriteBatchBuilder builder(keys_, leases_, 2, ids_, 100);
  EXPECT_EQ(
      builder.Apply(LeaseRevokeOp{1, false, LeaseCaller::OfNamespace("job-b")}).status().code(),
      absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(builder.empty());
  auto revoked = builder.Apply(LeaseRevokeOp{1, false, LeaseCaller::OfNamespace("job-a")});
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->deleted, 1);  // job-a's key; its owner key goes too, uncounted
  KvWriteBatch batch = builder.Build();
  EXPECT_EQ(batch.deletes.size(), 2u);
}

}  // namespace
}  // namespace ddp::kv
