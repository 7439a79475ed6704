#include "coordinator/kv/lease_table.h"

#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(LeaseTableTest, CollectExpired_PastDeadline_MarksExpiringOnce) {
  LeaseTable table;
  table.Grant(1, 100, "", kStart);
  table.Grant(2, 500, "", kStart);
  EXPECT_TRUE(table.CollectExpired(kStart + absl::Milliseconds(99)).empty());
  EXPECT_EQ(table.CollectExpired(kStart + absl::Milliseconds(100)), std::vector<LeaseId>{1});
  EXPECT_TRUE(table.CollectExpired(kStart + absl::Milliseconds(200)).empty());
  EXPECT_TRUE(table.Contains(1));  // until the revoke is committed
  EXPECT_EQ(table.KeepAlive(1, LeaseCaller::Anyone(), kStart).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(LeaseTableTest, KeepAlive_Live_MovesDeadline) {
  LeaseTable table;
  table.Grant(1, 100, "", kStart);
  auto ttl = table.KeepAlive(1, LeaseCaller::Anyone(), kStart + absl::Milliseconds(90));
  ASSERT_TRUE(ttl.ok());
  EXPECT_EQ(*ttl, 100);
  EXPECT_TRUE(table.CollectExpired(kStart + absl::Milliseconds(189)).empty());
  EXPECT_EQ(table.CollectExpired(kStart + absl::Milliseconds(190)).size(), 1u);
}

TEST(LeaseTableTest, ClearExpiring_AfterFailedRevoke_LiveAgain) {
  LeaseTable table;
  table.Grant(1, 100, "", kStart);
  ASSERT_EQ(table.CollectExpired(kStart + absl::Milliseconds(100)).size(), 1u);
  table.ClearExpiring(1, kStart + absl::Milliseconds(100));
  EXPECT_TRUE(table.KeepAlive(1, LeaseCaller::Anyone(), kStart + absl::Milliseconds(100)).ok());
}

TEST(LeaseTableTest, AttachDetachRemove_TracksKeys) {
  LeaseTable table;
  table.Grant(7, 100, "", kStart);
  table.AttachKey(7, "ns", "a");
  table.AttachKey(7, "ns", "b");
  table.DetachKey(7, "ns", "a");
  EXPECT_EQ(table.Keys(7).size(), 1u);
  EXPECT_TRUE(table.Keys(7).contains(LeaseTable::KeyRef("ns", "b")));
  table.Remove(7);
  EXPECT_FALSE(table.Contains(7));
  EXPECT_TRUE(table.Keys(7).empty());
  EXPECT_EQ(table.size(), 0u);
}

TEST(LeaseTableTest, KeepAlive_Unknown_NotFound) {
  LeaseTable table;
  EXPECT_EQ(table.KeepAlive(3, LeaseCaller::Anyone(), kStart).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(LeaseTableTest, KeepAlive_OtherNamespace_PermissionDeniedAndDeadlineKept) {
  LeaseTable table;
  table.Grant(1, 100, "job-a", kStart);
  EXPECT_EQ(table.Owner(1), "job-a");
  EXPECT_EQ(table.KeepAlive(1, LeaseCaller::OfNamespace("job-b"), kStart + absl::Milliseconds(90))
                .status()
                .code(),
            absl::StatusCode::kPermissionDenied);
  // The refused keep-alive did not move the deadline.
  EXPECT_EQ(table.CollectExpired(kStart + absl::Milliseconds(100)).size(), 1u);
}

TEST(LeaseTableTest, TimeLeft_CountsDownToZeroAndRefusesOthers) {
  LeaseTable table;
  table.Grant(1, 100, "job-a", kStart);
  auto left = table.TimeLeft(1, LeaseCaller::OfNamespace("job-a"), kStart + absl::Milliseconds(30));
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_EQ(left->remaining_ms, 70);
  EXPECT_EQ(left->granted_ttl_ms, 100);
  EXPECT_EQ(table.TimeLeft(1, LeaseCaller::Anyone(), kStart + absl::Seconds(5))->remaining_ms, 0);
  EXPECT_EQ(table.TimeLeft(1, LeaseCaller::OfNamespace("job-b"), kStart).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(table.TimeLeft(2, LeaseCaller::Anyone(), kStart).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_EQ(table.CollectExpired(kStart + absl::Milliseconds(100)).size(), 1u);
  EXPECT_EQ(table.TimeLeft(1, LeaseCaller::Anyone(), kStart).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(LeaseTableTest, IdsFor_OwnLeasesAscending_AnyoneSeesAllLive) {
  LeaseTable table;
  table.Grant(30, 100, "job-a", kStart);
  table.Grant(10, 100, "job-a", kStart);
  table.Grant(20, 500, "job-b", kStart);
  EXPECT_EQ(table.IdsFor(LeaseCaller::OfNamespace("job-a")), (std::vector<LeaseId>{10, 30}));
  EXPECT_EQ(table.IdsFor(LeaseCaller::Anyone()), (std::vector<LeaseId>{10, 20, 30}));
  ASSERT_EQ(table.CollectExpired(kStart + absl::Milliseconds(100)).size(), 2u);
  EXPECT_EQ(table.IdsFor(LeaseCaller::Anyone()), (std::vector<LeaseId>{20}));
}

TEST(LeaseTableTest, KeepAlive_OwnNamespace_Allowed) {
  LeaseTable table;
  table.Grant(1, 100, "job-a", kStart);
  EXPECT_TRUE(table.KeepAlive(1, LeaseCaller::OfNamespace("job-a"), kStart).ok());
}

TEST(LeaseTableTest, SetOwner_ExistingLease_ChecksNewOwner) {
  LeaseTable table;
  table.Grant(1, 100, "", kStart);
  EXPECT_EQ(table.KeepAlive(1, LeaseCaller::OfNamespace("job-a"), kStart).status().code(),
            absl::StatusCode::kPermissionDenied);
  table.SetOwner(1, "job-a");
  EXPECT_TRUE(table.KeepAlive(1, LeaseCaller::OfNamespace("job-a"), kStart).ok());
}

}  // namespace
}  // namespace ddp::kv
