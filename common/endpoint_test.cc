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

TEST(EndpointHostTest, HostWithoutBrackets) {
  EXPECT_EQ(EndpointHost("coord.example:29400"), "coord.example");
  EXPECT_EQ(EndpointHost("127.0.0.1:1"), "127.0.0.1");
  EXPECT_EQ(EndpointHost("[::1]:29400"), "::1");
  EXPECT_EQ(EndpointHost("no-port"), "");
  EXPECT_EQ(EndpointHost(":29400"), "");
}

TEST(ParseEndpointListTest, ListsAndTheirErrors) {
  auto one = ParseEndpointList("--coordinator", "a:1");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<std::string>({"a:1"}));
  auto three = ParseEndpointList("--coordinator", "a:1, b:2,[::1]:3");
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(*three, std::vector<std::string>({"a:1", "b:2", "[::1]:3"}));
  auto bad = ParseEndpointList("$DDP_COORDINATOR", "a:1,b:99999");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'b:99999'"), absl::string_view::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("$DDP_COORDINATOR"), absl::string_view::npos);
  EXPECT_FALSE(ParseEndpointList("--coordinator", "a:1,").ok());
  std::string many = "h:1";
  for (int i = 0; i < 16; ++i) many += ",h:1";
  auto too_many = ParseEndpointList("--coordinator", many);
  EXPECT_NE(too_many.status().message().find("at most 16"), absl::string_view::npos);
}

TEST(ParseCoordinatorListTest, HostPortSchemesAndLists_OneForm) {
  auto got = ParseCoordinatorList("--coordinator",
                                  "head, b:1,[::1],[::1]:7,grpc://c,http://d:5/, 10.0.0.1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::vector<std::string>({"head:29400", "b:1", "[::1]:29400", "[::1]:7",
                                            "c:29400", "d:5", "10.0.0.1:29400"}));
}

TEST(ParseCoordinatorListTest, OtherSchemeOrBadPort_NamesTheEntry) {
  auto https = ParseCoordinatorList("--coordinator", "a,https://b:1");
  EXPECT_EQ(https.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(https.status().message().find("'https://b:1'"), absl::string_view::npos)
      << https.status();
  EXPECT_NE(https.status().message().find("--tls-ca"), absl::string_view::npos);
  auto port = ParseCoordinatorList("--rdzv-endpoint", "a:99999");
  EXPECT_NE(port.status().message().find("'a:99999' for --rdzv-endpoint"), absl::string_view::npos)
      << port.status();
  EXPECT_FALSE(ParseCoordinatorList("--coordinator", "a,").ok());
}

}  // namespace
}  // namespace ddp
