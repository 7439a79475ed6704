// A real coordinator process and hostile HTTP clients (issue 23, point 5):
// 200 half-sent requests held open, heads trickled a byte at a time, 500
// event-stream attempts. Before, /healthz answered 1 of 10 (half-sent), 0 of
// 10 (trickled), and everything timed out after the stream attempts. Now
// every probe, REST call and scrape must answer within a second.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"

namespace ddp::testing {
namespace {

std::string TestDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp");
}

int ReadPortFile(const std::string& path) {
  for (int i = 0; i < 2000; ++i) {
    std::ifstream in(path);
    int port = 0;
    if (in >> port && port > 0) return port;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return 0;
}

// A TCP connection to 127.0.0.1:port from `source` (all of 127/8 is local);
// -1 if it fails.
int Connect(int port, const std::string& source) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

struct Answer {
  int status = 0;  // 0: none within the bound
  absl::Duration took;
};

// GET `path` with a fresh connection from `source`; the status line's code
// if the whole reply came within `bound`.
Answer Get(int port, const std::string& path, const std::string& source = "127.0.0.1",
           const std::string& token = "", absl::Duration bound = absl::Seconds(3)) {
  const absl::Time start = absl::Now();
  Answer answer;
  const int fd = Connect(port, source);
  if (fd < 0) return answer;
  std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
  if (!token.empty()) absl::StrAppend(&request, "Authorization: Bearer ", token, "\r\n");
  request += "\r\n";
  std::string reply;
  if (SendAll(fd, request)) {
    const absl::Time deadline = start + bound;
    char chunk[4096];
    while (absl::Now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) break;
      reply.append(chunk, static_cast<size_t>(n));
    }
  }
  close(fd);
  answer.took = absl::Now() - start;
  if (absl::StartsWith(reply, "HTTP/1.1 ") && reply.size() > 12 && answer.took < bound) {
    answer.status = std::atoi(reply.substr(9, 3).c_str());
  }
  return answer;
}

// 10 probes of `path`: how many answered 200 within a second each.
int AnsweredWithinASecond(int port, const std::string& path, const std::string& source) {
  int answered = 0;
  for (int i = 0; i < 10; ++i) {
    const Answer answer = Get(port, path, source);
    if (answer.status == 200 && answer.took < absl::Seconds(1)) ++answered;
  }
  return answered;
}

class HttpStarvationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorProcessOptions options;
    options.binary = CoordinatorBinaryFromRunfiles();
    options.data_dir = TestDir() + "/data";
    options.work_dir = TestDir();
    const std::string http_port_file = TestDir() + "/http.port";
    std::remove(http_port_file.c_str());
    options.extra_args = {"--http-port-file", http_port_file};
    coordinator_ = std::make_unique<CoordinatorProcess>(options);
    ASSERT_TRUE(coordinator_->Start().ok());
    port_ = ReadPortFile(http_port_file);
    ASSERT_GT(port_, 0);
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
    const int fd = Connect(port_, "127.0.0.1");
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
    const int fd = Connect(port_, "127.0.0.1");
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
    const int fd = Connect(port_, source);
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
