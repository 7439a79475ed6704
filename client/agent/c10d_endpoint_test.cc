#include "client/agent/c10d_endpoint.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/held_socket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

using ::testing::HasSubstr;

// A listener that accepts connections (the kernel's backlog) and never
// speaks: another program holding the port.
std::string EndpointOf(const ddp::testing::HeldSocket& held) {
  return absl::StrCat("127.0.0.1:", held.port());
}

// Issue 29, point 6: MASTER_PORT+1 held by another program is said at once,
// not after a minute of "cannot connect to the coordinator".
TEST(ServeC10dEndpointIfHereTest, PortTakenByNonCoordinator_FailedPreconditionAtOnce) {
  ddp::testing::HeldSocket other;
  ASSERT_TRUE(other.ok());
  const absl::Time start = absl::Now();
  auto served = ServeC10dEndpointIfHere(EndpointOf(other), "static form");
  EXPECT_EQ(served.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(served.status().message(),
              HasSubstr(EndpointOf(other) + " accepts connections but is not a coordinator"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));  // loose: the probe waits 3 s
  EXPECT_FALSE(SpeaksCoordinatorApi(EndpointOf(other), absl::Milliseconds(300)));
}

TEST(ServeC10dEndpointIfHereTest, WithTls_NotProbedInPlaintext) {
  ddp::testing::HeldSocket other;
  ASSERT_TRUE(other.ok());
  auto served = ServeC10dEndpointIfHere(EndpointOf(other), "static form", /*plaintext=*/false);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(*served, nullptr);  // something answers: the session will tell
}

}  // namespace
}  // namespace ddp::client
