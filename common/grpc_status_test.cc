#include "common/grpc_status.h"

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(GrpcStatusTest, RoundTrip_KeepsCodeAndMessage) {
  const absl::Status original =
      absl::ResourceExhaustedError("value is 2000000 bytes; limit 1048576");
  const grpc::Status wire = ToGrpcStatus(original);
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(wire.error_message(), "value is 2000000 bytes; limit 1048576");
  EXPECT_EQ(FromGrpcStatus(wire), original);
}

TEST(GrpcStatusTest, Ok_MapsToOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatusTest, EveryCanonicalCode_MapsToTheSameNumber) {
  for (int code = 1; code <= 16; ++code) {
    const absl::Status status(static_cast<absl::StatusCode>(code), "x");
    EXPECT_EQ(static_cast<int>(ToGrpcStatus(status).error_code()), code);
  }
}

}  // namespace
}  // namespace ddp
