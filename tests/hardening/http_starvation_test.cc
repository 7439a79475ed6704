// A real coordinator process and hostile HTTP clients (issue 23, point 5):
// 200 half-sent requests held open, heads trickled a byte at a time, 500
// event-stream attempts. Before, /healthz answered 1 of 10 (half-sent), 0 of
// 10 (trickled), and everything timed out after the stream attempts. Now
// every probe, REST call and scrape must answer within a second.

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "coordinator/http/testing/raw_http.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"
#include "tests/hardening/http_coordinator.h"

namespace ddp::testing {
namespace {

using http::testing::Call;
using http::testing::ConnectFrom;
using http::testing::HttpAnswer;
using http::testing::SendAll;

// 10 probes of `path`: how many answered 200 within a second each.
int AnsweredWithinASecond(int port, const std::string& path, const std::string& source) {
  int answered = 0;
  for (int i = 0; i < 10; ++i) {
    const HttpAnswer answer = Call(port, "GET", path, source);
    if (answer.status == 200 && answer.took < absl::Seconds(1)) ++answered;
  }
  return answered;
}

class HttpStarvationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CoordinatorProcessOptions options = HttpCoordinatorOptions();
    coordinator_ = std::make_unique<CoordinatorProcess>(options);
    const absl::StatusOr<int> port = StartWithHttp(*coordinator_, options);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }
  void TearDown() override {
    for (int fd : held_) close(fd);
    EXPECT_EQ(coordinator_->Terminate(), 0);
  }

  std::unique_ptr<CoordinatorProcess> coordinator_;
  int port_ = 0;
  std::vector<int> held_;
};

TEST_F(HttpStarvationTest, HalfSentRequests_HealthzAnswers10Of10) {
  for (int i = 0; i < 200; ++i) {
    const int fd = ConnectFrom(port_, "127.0.0.1");
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, "GET /v1/jobs HTTP/1.1\r\nHost: t\r\n"));  // never finished
    held_.push_back(fd);
  }
  // From the very address that holds them, and from another one.
  EXPECT_EQ(AnsweredWithinASecond(port_, "/healthz", "127.0.0.1"), 10);
  EXPECT_EQ(AnsweredWithinASecond(port_, "/readyz", "127.0.0.1"), 10);
  EXPECT_EQ(AnsweredWithinASecond(port_, "/v1/kv:status", "127.0.0.2"), 10);
}

TEST_F(HttpStarvationTest, TrickledHeaders_HealthzAnswers10Of10) {
  // 200 connections that each send a byte a second from the start: every
  // read sees progress, no head ever ends.
  const std::string head = "GET /v1/jobs HTTP/1.1\r\nHost: t\r\nX-Slow: ";
  absl::Mutex mu;
  std::vector<std::pair<int, size_t>> trickling;  // socket, bytes sent
  std::atomic<bool> done{false};
  std::thread trickler([&] {
    while (!done.load()) {
      {
        absl::MutexLock lock(&mu);
        for (auto& [fd, sent] : trickling) {
          send(fd, sent < head.size() ? &head[sent] : "a", 1, MSG_NOSIGNAL);
          ++sent;
        }
      }
      absl::SleepFor(absl::Seconds(1));
    }
  });
  for (int i = 0; i < 200; ++i) {
    const int fd = ConnectFrom(port_, "127.0.0.1");
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, "G"));
    held_.push_back(fd);
    absl::MutexLock lock(&mu);
    trickling.emplace_back(fd, 1);
  }
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_EQ(AnsweredWithinASecond(port_, "/healthz", "127.0.0.1"), 10);
  EXPECT_EQ(AnsweredWithinASecond(port_, "/v1/kv:status", "127.0.0.2"), 10);
  done.store(true);
  trickler.join();
}

TEST_F(HttpStarvationTest, FiveHundredEventStreams_HealthzRestAndMetricsAnswer) {
  // 500 event-stream requests from 250 addresses, held open and never read.
  for (int i = 0; i < 500; ++i) {
    const std::string source = absl::StrCat("127.0.1.", 1 + i % 250);
    const int fd = ConnectFrom(port_, source);
    ASSERT_GE(fd, 0) << i;
    ASSERT_TRUE(SendAll(fd, "GET /v1/kv/job:watch HTTP/1.1\r\nHost: t\r\n\r\n"));
    held_.push_back(fd);
  }
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(AnsweredWithinASecond(port_, "/healthz", "127.0.0.2"), 10);
  EXPECT_EQ(AnsweredWithinASecond(port_, "/healthz", "127.0.1.1"), 10);
  EXPECT_EQ(AnsweredWithinASecond(port_, "/v1/kv:status", "127.0.0.2"), 10);
  EXPECT_EQ(AnsweredWithinASecond(port_, "/metrics", "127.0.0.2"), 10);
}

}  // namespace
}  // namespace ddp::testing
