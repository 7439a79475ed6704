#include "client/prewarm/listener_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "absl/time/clock.h"
#include "common/testing/held_socket.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

// A loopback socket bound to a free port, not listening yet.
ddp::testing::HeldSocket BoundSocket() { return ddp::testing::HeldSocket({.backlog = -1}); }

TEST(AwaitListenerTest, ListensLater_TrueOnceItDoes) {
  ddp::testing::HeldSocket server = BoundSocket();
  ASSERT_TRUE(server.ok());
  std::thread later([&] {
    absl::SleepFor(absl::Milliseconds(200));
    listen(server.fd(), 8);
  });
  const absl::Time start = absl::Now();
  EXPECT_TRUE(AwaitListener("127.0.0.1", server.port(), absl::Seconds(30)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));
  later.join();
}

TEST(AwaitListenerTest, AlreadyListening_TrueAtOnce) {
  ddp::testing::HeldSocket server = BoundSocket();
  ASSERT_TRUE(server.ok());
  ASSERT_EQ(listen(server.fd(), 8), 0);
  EXPECT_TRUE(AwaitListener("localhost", server.port(), absl::Seconds(30)));
}

TEST(AwaitListenerTest, NothingListens_FalseAfterTheTimeout) {
  ddp::testing::HeldSocket server = BoundSocket();
  ASSERT_TRUE(server.ok());  // bound, never listening: connections are refused
  const absl::Time start = absl::Now();
  EXPECT_FALSE(AwaitListener("127.0.0.1", server.port(), absl::Milliseconds(300)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST(AwaitListenerTest, UnknownHost_False) {
  EXPECT_FALSE(AwaitListener("no-such-host.invalid", 1, absl::Seconds(1)));
}

}  // namespace
}  // namespace ddp::client
