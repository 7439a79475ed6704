#include "coordinator/session/job_watch_hub.h"

#include <atomic>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

using ::testing::HasSubstr;

class CountingListener final : public JobEventListener {
 public:
  void OnReady() override { ++ready; }
  std::atomic<int> ready{0};
};

std::vector<rendezvous::JobEvent> Events(const std::string& job, int first, int count) {
  std::vector<rendezvous::JobEvent> events;
  for (int i = 0; i < count; ++i) {
    rendezvous::JobEvent e;
    e.set_job_id(job);
    e.set_index(first + i);
    events.push_back(e);
  }
  return events;
}

TEST(JobWatchHub, Publish_OnlyTheJobsWatchersGetEvents) {
  JobWatchHub hub({});
  auto a = std::make_shared<CountingListener>();
  auto b = std::make_shared<CountingListener>();
  JobWatchHub::WatchId wa = *hub.Watch("a", a);
  JobWatchHub::WatchId wb = *hub.Watch("b", b);
  hub.Publish(Events("a", 1, 3));
  EXPECT_EQ(a->ready.load(), 1);  // empty -> non-empty only
  EXPECT_EQ(b->ready.load(), 0);
  std::vector<rendezvous::JobEvent> got;
  ASSERT_TRUE(hub.Take(wa, &got).ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].index(), 3);
  got.clear();
  ASSERT_TRUE(hub.Take(wb, &got).ok());
  EXPECT_TRUE(got.empty());
}

TEST(JobWatchHub, QueueFull_WatcherCutOffWithResumeIndex) {
  JobWatchHub hub({/*max_watchers=*/4, /*max_queued_events=*/2});
  auto listener = std::make_shared<CountingListener>();
  JobWatchHub::WatchId id = *hub.Watch("a", listener);
  hub.Publish(Events("a", 10, 3));
  std::vector<rendezvous::JobEvent> got;
  absl::Status status = hub.Take(id, &got);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("from index 10"));
  EXPECT_TRUE(got.empty());
}

TEST(JobWatchHub, MaxWatchers_ResourceExhausted) {
  JobWatchHub hub({/*max_watchers=*/1, /*max_queued_events=*/8});
  auto listener = std::make_shared<CountingListener>();
  JobWatchHub::WatchId id = *hub.Watch("a", listener);
  EXPECT_EQ(hub.Watch("a", listener).status().code(), absl::StatusCode::kResourceExhausted);
  hub.Cancel(id);
  EXPECT_EQ(hub.watcher_count(), 0);
  EXPECT_TRUE(hub.Watch("a", listener).ok());
}

TEST(JobWatchHub, Shutdown_EndsWatchersWithUnavailable) {
  JobWatchHub hub({});
  auto listener = std::make_shared<CountingListener>();
  JobWatchHub::WatchId id = *hub.Watch("a", listener);
  hub.Shutdown();
  EXPECT_EQ(listener->ready.load(), 1);
  std::vector<rendezvous::JobEvent> got;
  EXPECT_TRUE(absl::IsUnavailable(hub.Take(id, &got)));
  EXPECT_TRUE(absl::IsUnavailable(hub.Watch("a", listener).status()));
}

}  // namespace
}  // namespace ddp::session
