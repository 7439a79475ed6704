#include "coordinator/kv/lease_ownership.h"

#include "absl/container/flat_hash_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(LeaseOwnershipTest, RandomLeaseId_ManyDraws_PositiveDistinctAndSpread) {
  absl::flat_hash_set<LeaseId> seen;
  bool high_bit_seen = false;
  for (int i = 0; i < 10000; ++i) {
    const LeaseId id = RandomLeaseId();
    ASSERT_GT(id, 0);
    EXPECT_TRUE(seen.insert(id).second) << id;
    high_bit_seen = high_bit_seen || id > (LeaseId{1} << 62);
  }
  // Not a sequence from 1: half the draws are above 2^62.
  EXPECT_TRUE(high_bit_seen);
}

TEST(LeaseOwnershipTest, LeaseOwnerKey_RoundTrips_RejectsOtherKeys) {
  EXPECT_EQ(LeaseOwnerKey(255), "00000000000000ff");
  EXPECT_EQ(LeaseIdOfOwnerKey(LeaseOwnerKey(0x7fffffffffffffff)), 0x7fffffffffffffff);
  EXPECT_EQ(LeaseIdOfOwnerKey("ff"), std::nullopt);
  EXPECT_EQ(LeaseIdOfOwnerKey("0000000000000000"), std::nullopt);
  EXPECT_EQ(LeaseIdOfOwnerKey("8000000000000000"), std::nullopt);  // > INT64_MAX
  EXPECT_EQ(LeaseIdOfOwnerKey("00000000000000zz"), std::nullopt);
}

TEST(LeaseOwnershipTest, CheckLeaseCaller_OwnNamespaceOrAnyone_Allowed) {
  EXPECT_TRUE(CheckLeaseCaller(7, "job-a", LeaseCaller::OfNamespace("job-a"), "revoke").ok());
  EXPECT_TRUE(CheckLeaseCaller(7, "job-a", LeaseCaller::Anyone(), "revoke").ok());
  EXPECT_TRUE(CheckLeaseCaller(7, "", LeaseCaller::Anyone(), "revoke").ok());
}

TEST(LeaseOwnershipTest, CheckLeaseCaller_OtherJob_PermissionDeniedNotNamingOwner) {
  const absl::Status denied =
      CheckLeaseCaller(7, "job-a", LeaseCaller::OfNamespace("job-b"), "revoke");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.message(), HasSubstr("lease 7"));
  EXPECT_THAT(denied.message(), HasSubstr("'job-b'"));
  EXPECT_THAT(denied.message(), Not(HasSubstr("job-a")));
}

TEST(LeaseOwnershipTest, CheckLeaseCaller_OwnerlessLeaseAndJob_PermissionDenied) {
  const absl::Status denied =
      CheckLeaseCaller(7, "", LeaseCaller::OfNamespace("job-b"), "keep alive");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.message(), HasSubstr("belongs to no job"));
}

}  // namespace
}  // namespace ddp::kv
