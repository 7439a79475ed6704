// The stream queues (rpc::AsyncStreamQueues) opening queues as agents connect: one queue to start
// with, twice as many whenever each open one is full (2 streams beside the 8
// accepts it keeps requested).

#include <cstdlib>
#include <string>

#include "coordinator/rpc/stream_queue_placement.h"
#include "coordinator/session/testing/job_services_fixture.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

using ::ddp::session::testing::FakeAgent;
using ::ddp::session::testing::FastSettings;
using ::ddp::session::testing::kWait;

constexpr int kStreamsPerQueue = 2;
constexpr int kPendingAccepts = 8;  // AsyncStreamQueuesOptions::pending_accepts, one method

class SessionQueueGrowthTest : public testing::JobServicesTest {
 protected:
  void SetUp() override {
    setenv("DDP_TEST_SESSION_QUEUES", "1", 1);
    setenv("DDP_TEST_SESSION_QUEUE_STREAMS", std::to_string(kStreamsPerQueue).c_str(), 1);
    JobServicesTest::SetUp();
  }

  static int OpenQueues(int streams) {
    rpc::StreamQueuePlacement placement({.min_queues = 1,
                                     .streams_per_queue = kStreamsPerQueue,
                                     .max_queues = 64,
                                     .accepts_per_queue = kPendingAccepts});
    return placement.OpenQueues(streams + kPendingAccepts);
  }
};

TEST_F(SessionQueueGrowthTest, AgentsConnect_QueuesOpenAndEveryStreamWorks) {
  // One queue for the accepts requested at the start.
  EXPECT_EQ(services_->session_queue_threads(), OpenQueues(0));

  constexpr int kNodes = 12;
  for (int i = 0; i < kNodes; ++i) {
    FakeAgent& agent = MakeAgent("growth", "n" + std::to_string(i), FastSettings(kNodes, kNodes));
    ASSERT_TRUE(agent.Register(kWait).ok()) << i;
  }
  // Every session, on whichever queue, takes part in the rendezvous.
  for (auto& agent : agents_) ASSERT_TRUE(agent->WaitForAssignment(1, kWait).ok());
  EXPECT_EQ(services_->open_sessions(), kNodes);
  // More queues run than at the start, and none beyond those open (a queue's
  // thread starts with its first call).
  EXPECT_GT(services_->session_queue_threads(), OpenQueues(0));
  EXPECT_LE(services_->session_queue_threads(), OpenQueues(kNodes));

  // A group restart reaches them all (stop orders and new assignments are
  // written on each stream's own queue).
  const int64_t handed_before_restart = services_->session_writes_handed();
  agents_[5]->ReportExit(0, 1, 0, "boom");
  for (auto& agent : agents_) ASSERT_TRUE(agent->WaitForAssignment(2, kWait).ok());
  // The delivery thread sent each agent its stop order and its assignment;
  // it handed the writes to the streams' queue threads (at least one per
  // agent: a second message may follow from the queue thread itself, once the
  // first write is done).
  EXPECT_GE(services_->session_writes_handed() - handed_before_restart, kNodes);
}

TEST_F(SessionQueueGrowthTest, AgentsLeave_ClosedStreamsFreeTheirPlaces) {
  for (int i = 0; i < 6; ++i) {
    FakeAgent& agent = MakeAgent("leave", "n" + std::to_string(i), FastSettings(1, 6));
    ASSERT_TRUE(agent.Register(kWait).ok()) << i;
  }
  const int threads = services_->session_queue_threads();
  for (auto& agent : agents_) agent->Disconnect();
  agents_.clear();
  for (int i = 0; i < 100 && services_->open_sessions() > 0; ++i)
    absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(services_->open_sessions(), 0);
  // New agents fill the queues that are open; none opens beyond them.
  for (int i = 0; i < 6; ++i) {
    FakeAgent& agent = MakeAgent("leave", "m" + std::to_string(i), FastSettings(1, 6));
    ASSERT_TRUE(agent.Register(kWait).ok()) << i;
  }
  EXPECT_EQ(services_->session_queue_threads(), threads);
}

}  // namespace
}  // namespace ddp::session
