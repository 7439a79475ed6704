#include "common/listen_address.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/testing/held_socket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(DiagnoseListenTest, TakenPort_IsAlreadyExistsNamingAddressAndFlag) {
  testing::HeldSocket held;
  ASSERT_TRUE(held.ok());
  const int port = held.port();
  absl::Status status = DiagnoseListen("127.0.0.1", port, "gRPC", "--port");
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(std::string(status.message()), HasSubstr("--port"));
}

TEST(DiagnoseListenTest, TakenUdpPort_IsAlreadyExistsNamingTheUdpTool) {
  testing::HeldSocket held({.type = SOCK_DGRAM});
  ASSERT_TRUE(held.ok());
  const int port = held.port();
  absl::Status status = DiagnoseListen("127.0.0.1", port, "UDP heartbeats", "--heartbeat-udp-port",
                                       ListenTransport::kUdp);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("ss -lunp"));
  // The same number over TCP is free.
  EXPECT_TRUE(DiagnoseListen("127.0.0.1", port, "gRPC", "--port").ok());
}

TEST(DiagnoseListenTest, FreePort_IsOk) {
  testing::HeldSocket held;
  ASSERT_TRUE(held.ok());
  const int port = held.port();
  held.Close();
  EXPECT_TRUE(DiagnoseListen("127.0.0.1", port, "gRPC", "--port").ok());
}

TEST(DiagnoseListenTest, NonLocalAddress_IsUnavailable) {
  // TEST-NET-1 (RFC 5737) is never a local address.
  absl::Status status = DiagnoseListen("192.0.2.1", 1, "HTTP", "--http-port");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("--bind"));
}

TEST(DiagnoseListenTest, BracketedIpv6_BracketsStrippedBeforeResolving) {
  absl::Status status = DiagnoseListen("[::1]", 0, "gRPC", "--port");
  // "[::1]" itself does not resolve: brackets must be stripped first.
  EXPECT_THAT(std::string(status.message()), Not(HasSubstr("does not resolve"))) << status;
  // Port 0 always binds where IPv6 is on; some sandboxes have no IPv6.
  if (!status.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << status;
}

}  // namespace
}  // namespace ddp
