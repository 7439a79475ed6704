// The sessions' own stream queues with four starting queues (the target sets
// DDP_TEST_SESSION_QUEUES=4, the default 2,048 streams a queue): only queue 0
// runs until the first agent connects, since an idle queue's thread would take
// turns at polling every service's sockets; that agent opens the other three
// at once.

#include <string>

#include "absl/time/clock.h"
#include "coordinator/session/testing/job_services_fixture.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

using ::ddp::session::testing::FakeAgent;
using ::ddp::session::testing::FastSettings;
using ::ddp::session::testing::kWait;

using SessionQueuesIdleTest = testing::JobServicesTest;

TEST_F(SessionQueuesIdleTest, NoAgentYet_OneQueueRuns_TheFirstAgentOpensTheStartingQueues) {
  EXPECT_EQ(services_->session_queue_threads(), 1);
  FakeAgent& first = MakeAgent("idle", "n0", FastSettings(1, 4));
  ASSERT_TRUE(first.Register(kWait).ok());
  for (int i = 0; i < 100 && services_->session_queue_threads() < 4; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(services_->session_queue_threads(), 4);
  // Agents that come later land on any of them, and every session works.
  for (int i = 1; i < 4; ++i) {
    FakeAgent& agent = MakeAgent("idle", "n" + std::to_string(i), FastSettings(1, 4));
    ASSERT_TRUE(agent.Register(kWait).ok()) << i;
  }
  EXPECT_EQ(services_->session_queue_threads(), 4);
  EXPECT_EQ(services_->open_sessions(), 4);
}

}  // namespace
}  // namespace ddp::session
