#include "client/agent/c10d_endpoint.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

using ::testing::HasSubstr;

// A listener that accepts connections (the kernel's backlog) and never
// speaks: another program holding the port.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 16);
    socklen_t length = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  std::string endpoint() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Issue 29, point 6: MASTER_PORT+1 held by another program is said at once,
// not after a minute of "cannot connect to the coordinator".
TEST(ServeC10dEndpointIfHereTest, PortTakenByNonCoordinator_FailedPreconditionAtOnce) {
  SilentListener other;
  const absl::Time start = absl::Now();
  auto served = ServeC10dEndpointIfHere(other.endpoint(), "static form");
  EXPECT_EQ(served.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(served.status().message(),
              HasSubstr(other.endpoint() + " accepts connections but is not a coordinator"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));  // loose: the probe waits 3 s
  EXPECT_FALSE(SpeaksCoordinatorApi(other.endpoint(), absl::Milliseconds(300)));
}

TEST(ServeC10dEndpointIfHereTest, WithTls_NotProbedInPlaintext) {
  SilentListener other;
  auto served = ServeC10dEndpointIfHere(other.endpoint(), "static form", /*plaintext=*/false);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(*served, nullptr);  // something answers: the session will tell
}

}  // namespace
}  // namespace ddp::client
