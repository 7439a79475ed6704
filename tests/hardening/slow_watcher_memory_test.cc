// A real coordinator process, a KV watcher over gRPC and one over HTTP (event
// stream) that never read, and 512 MiB of writes (issue 23, point 4: before,
// one such watcher grew the coordinator by the size of every write: RSS
// 192 -> 574 MB over 500 MB). The writes overwrite four keys, so the live
// state stays small. The coordinator's resident memory must stay
// within a bound far below what was written, and the gRPC watcher, once it
// reads, must get every event once and in order (caught up from the history).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/proc_stats.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"
#include "tests/hardening/http_coordinator.h"

namespace ddp::testing {
namespace {

constexpr int kWriters = 4;
constexpr int kWarmUpPutsPerWriter = 128;
constexpr int kPutsPerWriter = 512;
constexpr size_t kValueBytes = 256 << 10;  // 4 x 512 x 256 KiB = 512 MiB written
// What the coordinator may grow by meanwhile: the two watchers' bound (4 MiB
// each), about a message in flight each, and the allocator's slack. Without
// the bound it grows by about what was written.
constexpr int64_t kMaxGrowthBytes = 64 << 20;

int64_t Rss(pid_t pid) {
  absl::StatusOr<int64_t> rss = ReadProcessRssBytes(pid);
  EXPECT_TRUE(rss.ok()) << rss.status();
  return rss.ok() ? *rss : 0;
}

// An event stream whose client reads nothing after its request (a 4 KiB
// receive buffer, so the kernel holds little for it either).
int OpenUnreadEventStream(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: test\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

// `writers` threads each overwrite their own key `puts` times with a value of
// kValueBytes; returns the number of failed puts.
int WriteLoad(const std::string& address, int writers, int puts) {
  const std::string value(kValueBytes, 'v');
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      auto stub = v1::KeyValueService::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
      for (int i = 0; i < puts; ++i) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        v1::PutRequest request;
        request.set_namespace_("job");
        // One key per writer, overwritten: the live state stays 1 MiB; what
        // grows is the history (on disk) and what watchers hold.
        request.set_key(absl::StrCat("k/", w));
        request.set_value(value);
        v1::PutResponse response;
        if (!stub->Put(&context, request, &response).ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return failures.load();
}

TEST(SlowWatcherMemoryTest, WatchersNeverRead_RssStaysBoundedThenEveryEventArrives) {
  const CoordinatorProcessOptions options = HttpCoordinatorOptions();
  CoordinatorProcess coordinator(options);
  const absl::StatusOr<int> http_port = StartWithHttp(coordinator, options);
  ASSERT_TRUE(http_port.ok()) << http_port.status();

  // The same load without watchers first: SQLite's cache, gRPC's and the
  // allocator's arenas reach their working size before the baseline.
  ASSERT_EQ(WriteLoad(coordinator.address(), kWriters, kWarmUpPutsPerWriter), 0);

  // The gRPC watcher reads the message that confirms the watch, then nothing.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, -1);
  auto watch_stub = v1::KeyValueService::NewStub(
      grpc::CreateCustomChannel(coordinator.address(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext watch_context;
  v1::WatchRequest watch;
  watch.set_namespace_("job");
  watch.set_prefix("k/");
  auto reader = watch_stub->Watch(&watch_context, watch);
  v1::WatchResponse response;
  ASSERT_TRUE(reader->Read(&response));
  ASSERT_EQ(response.events_size(), 0);
  const int64_t start_revision = response.revision();
  const int stream = OpenUnreadEventStream(*http_port, "/v1/kv/job:watch?prefix=k/");
  ASSERT_GE(stream, 0);
  absl::SleepFor(absl::Milliseconds(200));
  const int64_t baseline = Rss(coordinator.pid());

  std::atomic<int64_t> peak{baseline};
  std::atomic<bool> writing{true};
  std::thread sampler([&] {
    while (writing.load()) {
      const int64_t rss = Rss(coordinator.pid());
      int64_t seen = peak.load();
      while (rss > seen && !peak.compare_exchange_weak(seen, rss)) {
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  const int failures = WriteLoad(coordinator.address(), kWriters, kPutsPerWriter);
  writing.store(false);
  sampler.join();
  ASSERT_EQ(failures, 0);
  const int64_t growth = peak.load() - baseline;
  std::printf(
      "coordinator RSS: %lld MiB after the warm-up, peak %lld MiB while %d MiB were "
      "written with two watchers not reading\n",
      static_cast<long long>(baseline >> 20), static_cast<long long>(peak.load() >> 20),
      static_cast<int>((int64_t{kWriters} * kPutsPerWriter * kValueBytes) >> 20));
  EXPECT_LT(growth, kMaxGrowthBytes) << "grew by " << (growth >> 20) << " MiB";
  close(stream);

  // Now the gRPC watcher reads: every put, once, in revision order.
  int64_t events = 0, last_revision = start_revision;
  while (events < kWriters * kPutsPerWriter && reader->Read(&response)) {
    for (const v1::Event& event : response.events()) {
      EXPECT_EQ(event.kv().mod_revision(), last_revision + 1);  // no gap, no duplicate
      last_revision = event.kv().mod_revision();
      EXPECT_EQ(event.kv().value().size(), kValueBytes);
      ++events;
    }
  }
  EXPECT_EQ(events, kWriters * kPutsPerWriter);
  watch_context.TryCancel();
  while (reader->Read(&response)) {
  }
  reader->Finish();
  EXPECT_EQ(coordinator.Terminate(), 0);
}

}  // namespace
}  // namespace ddp::testing
