#include "coordinator/kv/sink_notifier.h"

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

// Records how often it was called and on which thread.
class RecordingSink : public WatchSink {
 public:
  explicit RecordingSink(absl::Mutex* mu, std::set<std::thread::id>* threads)
      : mu_(mu), threads_(threads) {}
  void OnReady() override {
    calls.fetch_add(1);
    absl::MutexLock lock(mu_);
    threads_->insert(std::this_thread::get_id());
  }
  std::atomic<int> calls{0};

 private:
  absl::Mutex* mu_;
  std::set<std::thread::id>* threads_;
};

std::vector<std::shared_ptr<WatchSink>> MakeSinks(int n, absl::Mutex* mu,
                                                  std::set<std::thread::id>* threads,
                                                  std::vector<RecordingSink*>* raw) {
  std::vector<std::shared_ptr<WatchSink>> sinks;
  for (int i = 0; i < n; ++i) {
    auto sink = std::make_shared<RecordingSink>(mu, threads);
    raw->push_back(sink.get());
    sinks.push_back(std::move(sink));
  }
  return sinks;
}

TEST(SinkNotifierTest, NotifyAll_ManySinks_EachExactlyOnceBeforeReturning) {
  SinkNotifier notifier(/*threads=*/3, /*min_parallel=*/8);
  absl::Mutex mu;
  std::set<std::thread::id> threads;
  std::vector<RecordingSink*> raw;
  auto sinks = MakeSinks(2000, &mu, &threads, &raw);
  for (int round = 0; round < 5; ++round) notifier.NotifyAll(sinks);
  for (RecordingSink* sink : raw) EXPECT_EQ(sink->calls.load(), 5);
}

TEST(SinkNotifierTest, NotifyAll_FewSinks_OnCallingThreadOnly) {
  SinkNotifier notifier(/*threads=*/2, /*min_parallel=*/8);
  absl::Mutex mu;
  std::set<std::thread::id> threads;
  std::vector<RecordingSink*> raw;
  auto sinks = MakeSinks(5, &mu, &threads, &raw);
  notifier.NotifyAll(sinks);
  absl::MutexLock lock(&mu);
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_EQ(*threads.begin(), std::this_thread::get_id());
}

TEST(SinkNotifierTest, NotifyAll_OneThread_AllInline) {
  SinkNotifier notifier(/*threads=*/1, /*min_parallel=*/2);
  absl::Mutex mu;
  std::set<std::thread::id> threads;
  std::vector<RecordingSink*> raw;
  auto sinks = MakeSinks(100, &mu, &threads, &raw);
  notifier.NotifyAll(sinks);
  for (RecordingSink* sink : raw) EXPECT_EQ(sink->calls.load(), 1);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(threads.size(), 1u);
}

TEST(SinkNotifierTest, ForEach_EveryIndexOnce) {
  SinkNotifier notifier(/*threads=*/2, /*min_parallel=*/4);
  std::vector<std::atomic<int>> hits(1000);
  notifier.ForEach(hits.size(), [&hits](size_t i) { hits[i].fetch_add(1); });
  for (const auto& hit : hits) EXPECT_EQ(hit.load(), 1);
  notifier.ForEach(0, [](size_t) { ADD_FAILURE() << "called for no item"; });
}

// A sink of one connection (SendGroup) that does nothing.
class GroupedSink : public WatchSink {
 public:
  explicit GroupedSink(uint64_t group) : group_(group) {}
  void OnReady() override {}
  uint64_t SendGroup() const override { return group_; }

 private:
  const uint64_t group_;
};

TEST(SinkNotifierTest, SendOrder_StreamsOfManyConnections_GroupedInListOrder) {
  // Watchers registered round-robin over three connections, as clients
  // spread their streams.
  std::vector<std::shared_ptr<WatchSink>> sinks;
  const uint64_t groups[] = {7, 3, 9, 7, 3, 9, 7, 0};
  for (uint64_t group : groups) sinks.push_back(std::make_shared<GroupedSink>(group));
  EXPECT_EQ(SendOrder(sinks), (std::vector<size_t>{7, 1, 4, 0, 3, 6, 2, 5}));
}

TEST(SinkNotifierTest, SendOrder_NoGroups_ListOrder) {
  std::vector<std::shared_ptr<WatchSink>> sinks;
  for (int i = 0; i < 5; ++i) sinks.push_back(std::make_shared<GroupedSink>(0));
  EXPECT_EQ(SendOrder(sinks), (std::vector<size_t>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace ddp::kv
