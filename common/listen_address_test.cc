#include "common/listen_address.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A listening socket on 127.0.0.1, any port; returns (fd, port).
std::pair<int, int> Listen() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(listen(fd, 1), 0);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return {fd, ntohs(address.sin_port)};
}

TEST(DiagnoseListenTest, TakenPort_IsAlreadyExistsNamingAddressAndFlag) {
  auto [fd, port] = Listen();
  absl::Status status = DiagnoseListen("127.0.0.1", port, "gRPC", "--port");
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(std::string(status.message()), HasSubstr("--port"));
  close(fd);
}

TEST(DiagnoseListenTest, TakenUdpPort_IsAlreadyExistsNamingTheUdpTool) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  const int port = ntohs(address.sin_port);
  absl::Status status = DiagnoseListen("127.0.0.1", port, "UDP heartbeats", "--heartbeat-udp-port",
                                       ListenTransport::kUdp);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("ss -lunp"));
  // The same number over TCP is free.
  EXPECT_TRUE(DiagnoseListen("127.0.0.1", port, "gRPC", "--port").ok());
  close(fd);
}

TEST(DiagnoseListenTest, FreePort_IsOk) {
  auto [fd, port] = Listen();
  close(fd);
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
