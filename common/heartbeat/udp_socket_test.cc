#include "common/heartbeat/udp_socket.h"

#include <sys/socket.h>

#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp::heartbeat {
namespace {

TEST(UdpSocketTest, ConnectedPeersExchangeDatagrams) {
  auto server = UdpSocket::Bind("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = server->local_port();
  ASSERT_GT(port, 0);
  EXPECT_GT(server->receive_buffer_bytes(), 0);
  auto client = UdpSocket::Connect("localhost", port);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(client->Send("ping", 4));
  char buffer[64];
  sockaddr_storage from{};
  socklen_t from_length = sizeof(from);
  const ssize_t n = recvfrom(server->fd(), buffer, sizeof(buffer), 0,
                             reinterpret_cast<sockaddr*>(&from), &from_length);
  ASSERT_EQ(n, 4);
  ASSERT_EQ(sendto(server->fd(), "pong", 4, 0, reinterpret_cast<sockaddr*>(&from), from_length), 4);
  ASSERT_EQ(client->Receive(buffer, sizeof(buffer), absl::Seconds(5)), 4);
  EXPECT_EQ(std::string(buffer, 4), "pong");
  EXPECT_EQ(client->Receive(buffer, sizeof(buffer), absl::Milliseconds(10)), -1);  // timeout
}

// A reader that falls behind: the kernel drops what its queue cannot hold,
// and says how many.
TEST(UdpSocketTest, AFullReceiveQueue_DropsAreCounted) {
  auto server = UdpSocket::Bind("127.0.0.1", 0, /*receive_buffer=*/4096);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = UdpSocket::Connect("127.0.0.1", server->local_port());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_EQ(server->dropped_on_arrival(), 0);
  const char datagram[48] = {};
  for (int i = 0; i < 500; ++i) client->Send(datagram, sizeof(datagram));
  // Loopback may deliver from a softirq thread a little later on a busy
  // machine: wait until the count stops moving.
  int64_t dropped = server->dropped_on_arrival();
  for (int i = 0; i < 200; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    const int64_t now = server->dropped_on_arrival();
    if (now == dropped && dropped > 0) break;
    dropped = now;
  }
  EXPECT_GT(dropped, 400) << "a 4 KB queue holds a few dozen datagrams at most";
  EXPECT_LT(dropped, 500);
}

TEST(UdpSocketTest, Ipv6InBrackets_AsListenAddressesSpellIt) {
  auto server = UdpSocket::Bind("[::1]", 0);
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << server.status();
  auto client = UdpSocket::Connect("[::1]", server->local_port());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(client->Send("ping", 4));
  char buffer[8];
  EXPECT_EQ(recv(server->fd(), buffer, sizeof(buffer), 0), 4);
}

TEST(UdpSocketTest, ErrorsNameTheAddress) {
  auto bad = UdpSocket::Bind("not-an-address", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("not-an-address"), std::string::npos);
  auto first = UdpSocket::Bind("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  auto taken = UdpSocket::Bind("127.0.0.1", first->local_port());
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(UdpSocket::Connect("127.0.0.1", 0).ok());
  EXPECT_FALSE(UdpSocket::Connect("127.0.0.1", 70000).ok());
  EXPECT_FALSE(UdpSocket::Connect("no-such-host.invalid", 9).ok());
}

TEST(UdpSocketTest, ShutdownReadsWakesAReceiver) {
  auto socket = UdpSocket::Connect("127.0.0.1", 9);
  ASSERT_TRUE(socket.ok());
  const absl::Time start = absl::Now();
  std::thread reader([&] {
    char buffer[8];
    socket->Receive(buffer, sizeof(buffer), absl::Seconds(30));
  });
  absl::SleepFor(absl::Milliseconds(50));  // the reader is waiting
  socket->ShutdownReads();
  reader.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the receiver waited out its timeout";
}

}  // namespace
}  // namespace ddp::heartbeat
