// The HTTP connection gate over real loopback sockets, with a hand-written
// serve() standing for httplib: silent and trickling clients, connection
// caps, health probes under load, keep-alive, stop.

#include "coordinator/http/connection_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "coordinator/http/testing/raw_http.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::http {
namespace {

using ::ddp::http::testing::ConnectFrom;
using ::ddp::http::testing::ReadFor;
using ::ddp::http::testing::SendAll;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kProbe[] = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";

// A listening socket on loopback whose accepted connections go to the gate.
class GateFixture {
 public:
  explicit GateFixture(ConnectionGateOptions options, ConnectionGate::Serve serve = EchoTarget())
      : gate_(options, nullptr, AnswerHealthz, std::move(serve)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(listen(listen_fd_, 1024), 0);
    socklen_t length = sizeof(address);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    EXPECT_TRUE(gate_.Start().ok());
    acceptor_ = std::thread([this] {
      while (true) {
        const int fd = accept(listen_fd_, nullptr, nullptr);
        if (fd < 0) return;
        gate_.Add(fd);
      }
    });
  }
  ~GateFixture() {
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    acceptor_.join();
    gate_.Stop();
  }

  // "200 <target>" for any request: what a handler would answer.
  static ConnectionGate::Serve EchoTarget() {
    return [](GateConnection& connection, bool /*last*/) {
      std::string head;
      char byte = 0;
      const absl::Time deadline = absl::Now() + absl::Seconds(5);
      while (!absl::EndsWith(head, "\r\n\r\n") && connection.Read(&byte, 1, deadline) == 1) {
        head.push_back(byte);
      }
      const std::string target = std::string(RequestLine(head).second);
      const std::string reply =
          absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", target.size(), "\r\n\r\n", target);
      return connection.Write(reply.data(), reply.size(), absl::Seconds(5));
    };
  }

  static std::optional<GateReply> AnswerHealthz(absl::string_view method,
                                                absl::string_view target) {
    if (method == "GET" && target == "/healthz") return GateReply{200, "text/plain", "ok\n"};
    return std::nullopt;
  }

  // A connection from `source` (any 127.x.y.z address is local).
  int Connect(const std::string& source = "127.0.0.1") const {
    const int fd = ConnectFrom(port_, source);
    EXPECT_GE(fd, 0) << "cannot connect from " << source;
    return fd;
  }

  // GET `target` on a new connection from `source`: what came until the
  // target was echoed (or a second passed).
  std::string Get(const std::string& target, const std::string& source) const {
    const int fd = Connect(source);
    const bool sent = SendAll(fd, absl::StrCat("GET ", target, " HTTP/1.1\r\nHost: t\r\n\r\n"));
    const std::string reply = sent ? ReadFor(fd, absl::Seconds(1), target) : "";
    close(fd);
    return reply;
  }

  ConnectionGate& gate() { return gate_; }

 private:
  ConnectionGate gate_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
};

void Send(int fd, const std::string& bytes) { ASSERT_TRUE(SendAll(fd, bytes)); }

// One probe on a new connection: the time its reply took, or InfiniteDuration.
absl::Duration Probe(const GateFixture& fixture, const std::string& source = "127.0.0.1") {
  const absl::Time start = absl::Now();
  const int fd = fixture.Connect(source);
  Send(fd, kProbe);
  const std::string reply = ReadFor(fd, absl::Seconds(3));
  close(fd);
  if (!absl::StartsWith(reply, "HTTP/1.1 200") || !absl::EndsWith(reply, "ok\n")) {
    return absl::InfiniteDuration();
  }
  return absl::Now() - start;
}

TEST(ConnectionGateTest, HalfSentRequests_ProbesStillAnsweredWithinASecond) {
  ConnectionGateOptions options;
  options.workers = 4;
  GateFixture fixture(options);
  std::vector<int> held;
  for (int i = 0; i < 200; ++i) {
    held.push_back(fixture.Connect());
    Send(held.back(), "GET /v1/jobs HTTP/1.1\r\nHost: t\r\n");  // never finished
  }
  int answered = 0;
  for (int i = 0; i < 10; ++i) answered += Probe(fixture) < absl::Seconds(1) ? 1 : 0;
  EXPECT_EQ(answered, 10);
  // Real requests from another address are served meanwhile.
  EXPECT_THAT(fixture.Get("/v1/jobs", "127.0.0.2"), StartsWith("HTTP/1.1 200"));
  for (int fd : held) close(fd);
}

TEST(ConnectionGateTest, TrickledHead_408AtHeaderTimeout) {
  ConnectionGateOptions options;
  options.header_timeout = absl::Milliseconds(400);
  GateFixture fixture(options);
  const int fd = fixture.Connect();
  const absl::Time start = absl::Now();
  const std::string head = "GET /v1/jobs HTTP/1.1\r\nHost: t\r\nX-Slow: ";
  std::string reply;
  // One byte every 50 ms: each read sees progress, the head never ends.
  for (size_t i = 0; i < 200 && reply.empty(); ++i) {
    send(fd, i < head.size() ? &head[i] : "a", 1, MSG_NOSIGNAL);
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) reply = ReadFor(fd, absl::Seconds(1));
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 408"));
  EXPECT_LT(took, absl::Seconds(2));
  EXPECT_GE(fixture.gate().stats().timed_out, 1);
  close(fd);
}

TEST(ConnectionGateTest, SilentConnection_ClosedAtHeaderTimeoutWithoutWorker) {
  ConnectionGateOptions options;
  options.header_timeout = absl::Milliseconds(200);
  std::atomic<int> served{0};
  GateFixture fixture(options, [&](GateConnection&, bool) {
    served.fetch_add(1);
    return false;
  });
  const int fd = fixture.Connect();
  EXPECT_THAT(ReadFor(fd, absl::Seconds(2)), StartsWith("HTTP/1.1 408"));
  EXPECT_EQ(served.load(), 0);
  EXPECT_EQ(fixture.gate().stats().open, 0u);
  close(fd);
}

TEST(ConnectionGateTest, OverPerClientCap_429ButProbesAnswered) {
  ConnectionGateOptions options;
  options.max_connections_per_client = 3;
  GateFixture fixture(options);
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(fixture.Connect());
  absl::SleepFor(absl::Milliseconds(50));  // counted in
  const int over = fixture.Connect();
  Send(over, "GET /v1/jobs HTTP/1.1\r\nHost: t\r\n\r\n");
  const std::string reply = ReadFor(over, absl::Seconds(2));
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 429"));
  EXPECT_THAT(reply, HasSubstr("per client address"));
  close(over);
  EXPECT_LT(Probe(fixture), absl::Seconds(1));
  // Another address has its own allowance.
  EXPECT_THAT(fixture.Get("/x", "127.0.0.3"), StartsWith("HTTP/1.1 200"));
  for (int fd : held) close(fd);
}

TEST(ConnectionGateTest, OverTotalCap_503) {
  ConnectionGateOptions options;
  options.max_connections = 2;
  GateFixture fixture(options);
  const int a = fixture.Connect("127.0.0.4");
  const int b = fixture.Connect("127.0.0.5");
  absl::SleepFor(absl::Milliseconds(50));
  const int c = fixture.Connect("127.0.0.6");
  Send(c, "GET /v1/jobs HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_THAT(ReadFor(c, absl::Seconds(2)), StartsWith("HTTP/1.1 503"));
  for (int fd : {a, b, c}) close(fd);
}

TEST(ConnectionGateTest, EveryWorkerBusy_ProbesAnsweredByTheGate) {
  ConnectionGateOptions options;
  options.workers = 2;
  absl::Notification release;
  GateFixture fixture(options, [&](GateConnection&, bool) {
    release.WaitForNotification();  // e.g. two event streams
    return false;
  });
  std::vector<int> busy;
  for (int i = 0; i < 4; ++i) {
    busy.push_back(fixture.Connect());
    Send(busy.back(), "GET /v1/jobs/j:watch HTTP/1.1\r\nHost: t\r\n\r\n");
  }
  int answered = 0;
  for (int i = 0; i < 10; ++i) answered += Probe(fixture) < absl::Seconds(1) ? 1 : 0;
  EXPECT_EQ(answered, 10);
  release.Notify();
  for (int fd : busy) close(fd);
}

TEST(ConnectionGateTest, KeepAlive_SecondRequestOnSameConnectionServed) {
  GateFixture fixture(ConnectionGateOptions{});
  const int fd = fixture.Connect();
  Send(fd, "GET /first HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_THAT(ReadFor(fd, absl::Seconds(2), "/first"), HasSubstr("/first"));
  Send(fd, "GET /second HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_THAT(ReadFor(fd, absl::Seconds(2), "/second"), HasSubstr("/second"));
  // Two requests in one send: both are answered, in order.
  Send(fd, "GET /third HTTP/1.1\r\nHost: t\r\n\r\nGET /fourth HTTP/1.1\r\nHost: t\r\n\r\n");
  const std::string both = ReadFor(fd, absl::Seconds(2), "/fourth");
  EXPECT_LT(both.find("/third"), both.find("/fourth"));
  close(fd);
}

TEST(ConnectionGateTest, KeepAliveIdle_ClosedAfterKeepAliveTimeout) {
  ConnectionGateOptions options;
  options.keep_alive_timeout = absl::Milliseconds(200);
  GateFixture fixture(options);
  const int fd = fixture.Connect();
  Send(fd, "GET /first HTTP/1.1\r\nHost: t\r\n\r\n");
  const absl::Time start = absl::Now();
  const std::string got = ReadFor(fd, absl::Seconds(3));
  EXPECT_THAT(got, HasSubstr("/first"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  close(fd);
}

TEST(ConnectionGateTest, HeadOverLimit_431) {
  ConnectionGateOptions options;
  options.max_head_bytes = 1024;
  GateFixture fixture(options);
  const int fd = fixture.Connect();
  Send(fd, "GET /x HTTP/1.1\r\nX-Big: " + std::string(2048, 'a'));
  EXPECT_THAT(ReadFor(fd, absl::Seconds(2)), StartsWith("HTTP/1.1 431"));
  close(fd);
}

TEST(ConnectionGateTest, Stop_EndsRequestsUnderWay) {
  ConnectionGateOptions options;
  std::atomic<bool> read_failed{false};
  auto fixture = std::make_unique<GateFixture>(options, [&](GateConnection& connection, bool) {
    char byte;
    // Waits for a body that never comes.
    while (connection.Read(&byte, 1, absl::Now() + absl::Seconds(30)) > 0) {
    }
    read_failed.store(true);
    return false;
  });
  const int fd = fixture->Connect();
  Send(fd, "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n");
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time start = absl::Now();
  fixture.reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(read_failed.load());
  close(fd);
}

TEST(RequestLineTest, ParsesMethodAndTarget) {
  EXPECT_EQ(RequestLine("GET /healthz?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            std::make_pair(absl::string_view("GET"), absl::string_view("/healthz?x=1")));
  EXPECT_EQ(RequestLine("garbage\r\n\r\n").first, "");
  EXPECT_EQ(HeadEnd("GET / HTTP/1.1\r\nA: b\r\n\r\nbody"), 24u);
  EXPECT_EQ(HeadEnd("GET / HTTP/1.1\r\nA: b\r\n"), absl::string_view::npos);
}

}  // namespace
}  // namespace ddp::http
