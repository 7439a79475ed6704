#include "client/free_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/testing/held_socket.h"
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
  ddp::testing::HeldSocket held({.address = INADDR_ANY});
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(PortIsFree("0.0.0.0", held.port()));
}

}  // namespace
}  // namespace ddp::client
