#include "coordinator/kv/kv_validation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

using ::testing::HasSubstr;

TEST(KvValidationTest, ValidateNamespace_AllowedCharacters_Ok) {
  EXPECT_TRUE(ValidateNamespace("job-1.run_A", KvLimits()).ok());
}

TEST(KvValidationTest, ValidateNamespace_BadCharacterOrLength_InvalidArgument) {
  const KvLimits limits;
  EXPECT_EQ(ValidateNamespace("", limits).code(), absl::StatusCode::kInvalidArgument);
  absl::Status slash = ValidateNamespace("a/b", limits);
  EXPECT_EQ(slash.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(slash.message(), HasSubstr("a/b"));
  absl::Status long_ns = ValidateNamespace(std::string(129, 'a'), limits);
  EXPECT_EQ(long_ns.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(long_ns.message(), HasSubstr("128"));
}

TEST(KvValidationTest, ValidateKey_EmptyOrTooLong_Rejected) {
  KvLimits limits;
  limits.max_key_bytes = 8;
  EXPECT_EQ(ValidateKey("", limits).code(), absl::StatusCode::kInvalidArgument);
  absl::Status status = ValidateKey("123456789", limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("9 bytes"));
  EXPECT_THAT(status.message(), HasSubstr("limit is 8"));
  EXPECT_TRUE(ValidateKey("12345678", limits).ok());
}

TEST(KvValidationTest, ValidateValue_TooLong_ResourceExhausted) {
  KvLimits limits;
  limits.max_value_bytes = 3;
  EXPECT_TRUE(ValidateValue("", limits).ok());
  EXPECT_EQ(ValidateValue("abcd", limits).code(), absl::StatusCode::kResourceExhausted);
}

TEST(KvValidationTest, ResolveRangeLimit_ZeroNegativeHuge_DefaultOrError) {
  const KvLimits limits;
  EXPECT_EQ(*ResolveRangeLimit(0, limits), limits.default_range_limit);
  EXPECT_EQ(*ResolveRangeLimit(5, limits), 5u);
  EXPECT_EQ(ResolveRangeLimit(-1, limits).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveRangeLimit(limits.max_range_limit + 1, limits).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(KvValidationTest, ResolveWaitTimeout_ZeroAndBounds_DefaultOrError) {
  const KvLimits limits;
  EXPECT_EQ(*ResolveWaitTimeout(0, limits), limits.default_wait_timeout);
  EXPECT_EQ(*ResolveWaitTimeout(250, limits), absl::Milliseconds(250));
  EXPECT_EQ(ResolveWaitTimeout(-5, limits).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveWaitTimeout(48LL * 3600 * 1000, limits).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(KvValidationTest, ValidateWaitKeyCount_NoneOrTooMany_Rejected) {
  KvLimits limits;
  limits.max_keys_per_request = 2;
  EXPECT_EQ(ValidateWaitKeyCount(0, limits).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateWaitKeyCount(3, limits).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ValidateWaitKeyCount(2, limits).ok());
}

TEST(KvValidationTest, ValidateLeaseTtl_OutOfRange_InvalidArgument) {
  const KvLimits limits;
  EXPECT_EQ(ValidateLeaseTtl(99, limits).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateLeaseTtl(100, limits).ok());
  EXPECT_EQ(ValidateLeaseId(0).code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvValidationTest, AbbreviateForMessage_LongBinary_EscapedAndCapped) {
  const std::string text = AbbreviateForMessage(std::string(100, '\x01'), 4);
  EXPECT_EQ(text, "\\x01\\x01\\x01\\x01... (100 bytes)");
}

}  // namespace
}  // namespace ddp::kv
