#include "coordinator/http/proto_fields.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ddp/v1/jobs.pb.h"
#include "proto/ddp/v1/kv.pb.h"

namespace ddp::http {
namespace {

using ::testing::HasSubstr;

TEST(ProtoFieldsTest, SetsScalarsByProtoOrJsonName) {
  ddp::v1::RangeRequest range;
  ASSERT_TRUE(SetFieldFromText(range, "namespace", "ns").ok());
  ASSERT_TRUE(SetFieldFromText(range, "prefix", "ckpt/").ok());
  ASSERT_TRUE(SetFieldFromText(range, "limit", "100").ok());
  ASSERT_TRUE(SetFieldFromText(range, "keysOnly", "true").ok());
  ASSERT_TRUE(SetFieldFromText(range, "start_after", "ckpt/7").ok());
  EXPECT_EQ(range.namespace_(), "ns");
  EXPECT_EQ(range.prefix(), "ckpt/") << "bytes take the raw text, not base64";
  EXPECT_EQ(range.limit(), 100);
  EXPECT_TRUE(range.keys_only());
  EXPECT_EQ(range.start_after(), "ckpt/7");
}

TEST(ProtoFieldsTest, NestedRepeatedAndEnumFields) {
  ddp::v1::CreateJobRequest create;
  ASSERT_TRUE(SetFieldFromText(create, "settings.min_nodes", "2").ok());
  ASSERT_TRUE(SetFieldFromText(create, "settings.heartbeatTimeoutMs", "15000").ok());
  EXPECT_EQ(create.settings().min_nodes(), 2);
  EXPECT_EQ(create.settings().heartbeat_timeout_ms(), 15000);
  ddp::v1::ListJobsRequest list;
  ASSERT_TRUE(SetFieldFromText(list, "states", "RUNNING").ok());
  ASSERT_TRUE(SetFieldFromText(list, "states", "6").ok());
  ASSERT_EQ(list.states_size(), 2);
  EXPECT_EQ(list.states(0), ddp::v1::RUNNING);
  EXPECT_EQ(list.states(1), ddp::v1::FAILED);
}

TEST(ProtoFieldsTest, BadInputNamesTheParameterAndType) {
  ddp::v1::RangeRequest range;
  absl::Status unknown = SetFieldFromText(range, "limt", "1");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("'limt'"));
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("ddp.v1.RangeRequest"));
  absl::Status not_number = SetFieldFromText(range, "limit", "ten");
  EXPECT_THAT(std::string(not_number.message()), HasSubstr("'ten' is not a 64-bit integer"));
  absl::Status overflow = SetFieldFromText(range, "limit", "99999999999999999999");
  EXPECT_EQ(overflow.code(), absl::StatusCode::kInvalidArgument);
  ddp::v1::ListJobsRequest list;
  absl::Status bad_enum = SetFieldFromText(list, "states", "SLEEPING");
  EXPECT_THAT(std::string(bad_enum.message()), HasSubstr("ddp.v1.JobState"));
  ddp::v1::CreateJobRequest create;
  absl::Status message_field = SetFieldFromText(create, "settings", "x");
  EXPECT_THAT(std::string(message_field.message()), HasSubstr("JSON body"));
  absl::Status through_scalar = SetFieldFromText(create, "job_id.x", "1");
  EXPECT_EQ(through_scalar.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ddp::http
