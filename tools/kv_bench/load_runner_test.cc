#include "tools/kv_bench/load_runner.h"

#include <atomic>
#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp::kv_bench {
namespace {

TEST(Quantile, KnownSamples_PicksNearestRank) {
  std::vector<absl::Duration> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(absl::Milliseconds(i));
  EXPECT_EQ(Quantile(samples, 0.5), absl::Milliseconds(50));
  EXPECT_EQ(Quantile(samples, 0.99), absl::Milliseconds(99));
  EXPECT_EQ(Quantile(samples, 1.0), absl::Milliseconds(100));
  std::vector<absl::Duration> empty;
  EXPECT_EQ(Quantile(empty, 0.5), absl::ZeroDuration());
}

TEST(FormatLatency, MicrosAndMillis) {
  EXPECT_EQ(FormatLatency(absl::Microseconds(850)), "850 us");
  EXPECT_EQ(FormatLatency(absl::Microseconds(12345)), "12.35 ms");
}

// Completes operations on its own threads after a delay, like gRPC's callback
// threads would.
class FakeAsyncServer {
 public:
  explicit FakeAsyncServer(absl::Duration delay) : delay_(delay) {
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { Serve(); });
  }
  ~FakeAsyncServer() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }
  void Submit(int client, bool fail, OperationDone& done) {
    absl::MutexLock lock(&mu_);
    queue_.push_back({client, fail, &done, absl::Now() + delay_});
  }

 private:
  struct Call {
    int client;
    bool fail;
    OperationDone* done;
    absl::Time due;
  };
  void Serve() {
    while (true) {
      Call call;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](FakeAsyncServer* s)
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) { return s->stop_ || !s->queue_.empty(); },
            this));
        if (queue_.empty()) return;
        call = queue_.front();
        queue_.pop_front();
      }
      absl::SleepFor(call.due - absl::Now());
      call.done->Done(call.client, call.fail ? "boom" : "");
    }
  }

  const absl::Duration delay_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Call> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

TEST(RunClosedLoop, AsyncCompletions_CountsSuccessesAndErrorsPerClient) {
  FakeAsyncServer server(absl::Microseconds(200));
  std::atomic<int> started{0};
  std::atomic<int> in_flight_max{0};
  std::vector<std::atomic<int>> in_flight(4);
  LoadOptions options;
  options.clients = 4;
  options.duration = absl::Milliseconds(100);
  options.warmup = absl::ZeroDuration();
  int window_events = 0;
  options.on_window_start = [&] { ++window_events; };
  options.on_window_end = [&] { ++window_events; };
  const LoadResult result = RunClosedLoop(options, [&](int client, int64_t, OperationDone& done) {
    ++started;
    const int now = ++in_flight[client];
    int seen = in_flight_max.load();
    while (now > seen && !in_flight_max.compare_exchange_weak(seen, now)) {
    }
    // Decremented before completing: the runner may start the next one
    // from inside Done.
    struct Wrapper : OperationDone {
      OperationDone* inner;
      std::atomic<int>* counter;
      void Done(int c, absl::string_view error) override {
        --*counter;
        inner->Done(c, error);
        delete this;
      }
    };
    auto* wrapper = new Wrapper;
    wrapper->inner = &done;
    wrapper->counter = &in_flight[client];
    server.Submit(client, client == 0, *wrapper);
  });
  EXPECT_GT(result.ops, 0);
  EXPECT_GT(result.errors, 0);
  EXPECT_EQ(result.first_error, "boom");
  EXPECT_EQ(result.ops + result.errors, started.load());
  EXPECT_EQ(in_flight_max.load(), 1);  // one operation per client at a time
  EXPECT_GE(result.p50, absl::Microseconds(200));
  EXPECT_GT(result.ops_per_second, 0);
  EXPECT_EQ(window_events, 2);
}

TEST(RunClosedLoop, InlineCompletions_LoopWithoutRecursion) {
  // Every operation fails at once on the calling thread: hundreds of
  // thousands of operations per client, which would overflow the stack if
  // each one recursed into the next.
  LoadOptions options;
  options.clients = 2;
  options.duration = absl::Milliseconds(200);
  options.warmup = absl::ZeroDuration();
  std::atomic<int64_t> started{0};
  const LoadResult result = RunClosedLoop(options, [&](int client, int64_t, OperationDone& done) {
    ++started;
    done.Done(client, "refused");
  });
  EXPECT_EQ(result.ops, 0);
  EXPECT_EQ(result.errors, started.load());
  EXPECT_GT(result.errors, 10000);
  EXPECT_EQ(result.first_error, "refused");
}

TEST(RunClosedLoop, Warmup_OperationsBeforeWindowNotCounted) {
  FakeAsyncServer server(absl::Milliseconds(1));
  LoadOptions options;
  options.clients = 1;
  options.warmup = absl::Milliseconds(100);
  options.duration = absl::Milliseconds(50);
  std::atomic<int> started{0};
  const LoadResult result = RunClosedLoop(options, [&](int client, int64_t, OperationDone& done) {
    ++started;
    server.Submit(client, false, done);
  });
  // About 150 operations started; only those of the last 50 ms count.
  EXPECT_GT(result.ops, 0);
  EXPECT_LT(result.ops, started.load());
  EXPECT_EQ(result.errors, 0);
}

TEST(RunClosedLoop, OperationNeverEnds_ReportsStuckClients) {
  LoadOptions options;
  options.clients = 3;
  options.duration = absl::Milliseconds(20);
  options.warmup = absl::ZeroDuration();
  options.drain_timeout = absl::Milliseconds(50);
  FakeAsyncServer server(absl::Microseconds(100));
  std::vector<OperationDone*> never_finished;
  absl::Mutex mu;
  const LoadResult result = RunClosedLoop(options, [&](int client, int64_t, OperationDone& done) {
    if (client == 1) {  // a call that hangs
      absl::MutexLock lock(&mu);
      never_finished.push_back(&done);
      return;
    }
    server.Submit(client, false, done);
  });
  EXPECT_EQ(result.stuck_clients, 1);
  // Late completion after the runner returned must be harmless.
  absl::MutexLock lock(&mu);
  ASSERT_EQ(never_finished.size(), 1u);
  never_finished[0]->Done(1, "");
}

}  // namespace
}  // namespace ddp::kv_bench
