#include "common/endpoint.h"

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(ValidateEndpointTest, GoodEndpoints_Ok) {
  for (const char* good : {"localhost:29400", "10.0.0.1:1", "[::1]:65535", "head-0.cluster:80"}) {
    EXPECT_TRUE(ValidateEndpoint("--coordinator", good).ok()) << good;
  }
}

TEST(ValidateEndpointTest, BadEndpoints_InvalidArgumentNamingValueAndLimit) {
  for (const char* bad : {"127.0.0.1:99999", "127.0.0.1:0", "host", ":29400", "host:", "a b:1",
                          "host:-1", "host:12ab"}) {
    absl::Status status = ValidateEndpoint("--coordinator", bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find(std::string("'") + bad + "'"), absl::string_view::npos)
        << status;
    EXPECT_NE(status.message().find("[1, 65535]"), absl::string_view::npos) << status;
  }
}

}  // namespace
}  // namespace ddp
