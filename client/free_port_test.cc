#include "client/free_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

TEST(PickFreePortTest, Pick_Default_PortBelowEphemeralRangeAndBindable) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GE(*port, 20000);
  EXPECT_LE(*port, 65535);
  EXPECT_TRUE(PortIsFree("0.0.0.0", *port));
}

TEST(PickFreePortTest, Pick_NoRandomTries_FallsBackToKernelChoice) {
  FreePortOptions options;
  options.attempts = 0;
  options.bind_address = "127.0.0.1";
  auto port = PickFreePort(options);
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
}

TEST(PickFreePortTest, Pick_BadAddress_InvalidArgument) {
  FreePortOptions options;
  options.bind_address = "not-an-ip";
  EXPECT_EQ(PickFreePort(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PortIsFreeTest, Listening_NotFree) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  EXPECT_FALSE(PortIsFree("0.0.0.0", ntohs(address.sin_port)));
  close(fd);
}

}  // namespace
}  // namespace ddp::client
