// RendezvousService with a fake clock: the ticker fires the core's timeouts,
// the commit loop's sends route messages to sessions and events to watchers.

#include "coordinator/session/rendezvous_service.h"

#include <memory>
#include <vector>

#include "common/clock.h"
#include "coordinator/session/testing/with_own_commit_loop.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

class RecordingSink final : public SessionSink {
 public:
  void Deliver(const rendezvous::OutboundMessage& message) override {
    absl::MutexLock lock(&mu);
    messages.push_back(message);
  }
  void Close(const absl::Status&) override {}
  bool WaitForCount(size_t n) {
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return messages.size() >= n; };
    absl::MutexLock lock(&mu);
    return mu.AwaitWithTimeout(absl::Condition(&enough), kWait);
  }
  absl::Mutex mu;
  std::vector<rendezvous::OutboundMessage> messages ABSL_GUARDED_BY(mu);
};

class ReadyListener final : public JobEventListener {
 public:
  void OnReady() override {
    absl::MutexLock lock(&mu);
    ready = true;
  }
  absl::Mutex mu;
  bool ready ABSL_GUARDED_BY(mu) = false;
};

rendezvous::JobSettings Settings() {
  rendezvous::JobSettings s = rendezvous::DefaultJobSettings();
  s.set_min_nodes(1);
  s.set_max_nodes(2);
  s.set_last_call_timeout_ms(5000);
  s.set_heartbeat_interval_ms(1000);
  s.set_heartbeat_timeout_ms(10000);
  return s;
}

RendezvousServiceWithLoop Make(FakeClock& clock, rendezvous::JobStateStore* store) {
  RendezvousServiceOptions options;
  options.tick_interval = absl::Milliseconds(5);
  options.stall_threshold = absl::ZeroDuration();  // the fake clock jumps between ticks
  auto service = StartRendezvousServiceWithLoop(clock, store, options);
  EXPECT_TRUE(service.ok()) << service.status();
  return std::move(*service);
}

TEST(RendezvousService, LastCallTimeout_TickerClosesRendezvous_MessageRouted) {
  FakeClock clock;
  rendezvous::InMemoryJobStateStore store;
  RendezvousServiceWithLoop service = Make(clock, &store);
  auto sink = std::make_shared<RecordingSink>();
  rendezvous::RegisterRequest request;
  request.job_id = "job";
  request.node_id = "a";
  request.incarnation = 9;
  request.settings = Settings();
  ASSERT_TRUE(service->OpenSession(request, sink).ok());
  // One node of 1:2: the rendezvous closes when the last call expires, which
  // only the ticker can notice.
  clock.Advance(absl::Seconds(6));
  // Registered (the reply, once durable), then the request for master info.
  ASSERT_TRUE(sink->WaitForCount(2));
  absl::MutexLock lock(&sink->mu);
  EXPECT_TRUE(std::holds_alternative<rendezvous::Registered>(sink->messages[0].body));
  const auto* request_info = std::get_if<rendezvous::RequestMasterInfo>(&sink->messages[1].body);
  ASSERT_NE(request_info, nullptr);
  EXPECT_EQ(request_info->generation, 1);
}

TEST(RendezvousService, Events_PublishedToWatchers) {
  FakeClock clock;
  RendezvousServiceWithLoop service = Make(clock, nullptr);
  auto listener = std::make_shared<ReadyListener>();
  JobWatchHub::WatchId id = *service->WatchJob("job", listener);
  ASSERT_TRUE(service->CreateJob("job", Settings(), "").ok());
  {
    absl::MutexLock lock(&listener->mu);
    ASSERT_TRUE(listener->mu.AwaitWithTimeout(absl::Condition(&listener->ready), kWait));
  }
  std::vector<rendezvous::JobEvent> events;
  ASSERT_TRUE(service->TakeWatchedEvents(id, &events).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type(), rendezvous::JobEvent::JOB_CREATED);
  EXPECT_EQ(events[0].index(), 1);
}

TEST(RendezvousService, MessageForOldIncarnation_Dropped) {
  FakeClock clock;
  RendezvousServiceWithLoop service = Make(clock, nullptr);
  auto sink = std::make_shared<RecordingSink>();
  service->router_for_testing().Attach("job", "a", 1, sink);
  rendezvous::RegisterRequest request;
  request.job_id = "job";
  request.node_id = "a";
  request.incarnation = 2;  // the sink is attached for incarnation 1
  request.settings = Settings();
  request.settings->set_max_nodes(1);
  ASSERT_TRUE(service->registry_for_testing().Register(request).ok());
  service->Shutdown();  // drains the outbox one last time
  EXPECT_GE(service->router_for_testing().dropped(), 1);
  absl::MutexLock lock(&sink->mu);
  EXPECT_TRUE(sink->messages.empty());
}

TEST(RendezvousService, Create_ZeroTickInterval_InvalidArgument) {
  FakeClock clock;
  RendezvousServiceOptions options;
  options.tick_interval = absl::ZeroDuration();
  EXPECT_EQ(StartRendezvousServiceWithLoop(clock, nullptr, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RendezvousService, Restart_RestoresJobsFromStore) {
  FakeClock clock;
  rendezvous::InMemoryJobStateStore store;
  {
    RendezvousServiceWithLoop first = Make(clock, &store);
    ASSERT_TRUE(first->CreateJob("kept", Settings(), "").ok());
  }
  RendezvousServiceWithLoop second = Make(clock, &store);
  absl::StatusOr<v1::Job> job = second->GetJob("kept", false);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->settings().DebugString(), Settings().DebugString());
}

}  // namespace
}  // namespace ddp::session
