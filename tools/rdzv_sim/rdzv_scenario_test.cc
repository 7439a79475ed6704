// End to end: the real simulator (gRPC async streams) against a real
// server process on port 0 — the stand-in coordinator that serves the same
// SessionService and JobService as //coordinator.

#include "tools/rdzv_sim/rdzv_scenario.h"

#include <stdlib.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddp::rdzv_sim {
namespace {

ScenarioOptions SmallRun() {
  ScenarioOptions options;
  options.coordinator_binary =
      absl::StrCat(getenv("TEST_SRCDIR"), "/ddp_coordinator/tools/rdzv_sim/standin_coordinator");
  options.work_root = getenv("TEST_TMPDIR");
  options.channels = 4;
  options.heartbeat_threads = 2;
  options.heartbeat_interval = absl::Milliseconds(100);
  options.heartbeat_timeout = absl::Seconds(5);
  options.heartbeat_window = absl::Milliseconds(500);
  options.phase_timeout = absl::Seconds(20);
  options.settle = absl::Milliseconds(100);
  options.seed = 7;
  return options;
}

TEST(RdzvScenario, RunScenario_EightNodes_RendezvousRestartAndHeartbeats) {
  const SizeResult r = RunScenario(SmallRun(), 8);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.warning, "");
  EXPECT_EQ(r.nodes, 8);
  EXPECT_EQ(r.channels, 4);
  EXPECT_EQ(r.generation, 1);
  EXPECT_EQ(r.restart_generation, 2);
  EXPECT_GT(r.rendezvous, absl::ZeroDuration());
  EXPECT_LT(r.rendezvous, absl::Seconds(20));
  EXPECT_GT(r.restart, absl::ZeroDuration());
  EXPECT_EQ(r.registration_round_trip.count, 8);
  // 8 agents at 10 Hz for ~0.5 s: about 40 heartbeats.
  EXPECT_GT(r.heartbeats_sent, 20);
  EXPECT_LT(r.heartbeats_sent, 80);
  ASSERT_TRUE(r.coordinator_cpu_fraction.has_value());
  EXPECT_GE(*r.coordinator_cpu_fraction, 0.0);
  ASSERT_TRUE(BytesPerAgent(r).has_value());
}

TEST(RdzvScenario, SimCompletionQueues_FourThenOnePer2048NodesUpTo64) {
  EXPECT_EQ(SimCompletionQueues(8), 4);
  EXPECT_EQ(SimCompletionQueues(8192), 4);
  EXPECT_EQ(SimCompletionQueues(8193), 5);
  EXPECT_EQ(SimCompletionQueues(16384), 8);
  EXPECT_EQ(SimCompletionQueues(65536), 32);
  EXPECT_EQ(SimCompletionQueues(1 << 20), 64);
}

TEST(RdzvScenario, RunScenario_NoServer_ErrorNamesTheProblem) {
  ScenarioOptions options = SmallRun();
  options.coordinator_binary = "/nonexistent/coordinator";
  const SizeResult r = RunScenario(options, 4);
  EXPECT_NE(r.error.find("not executable"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace ddp::rdzv_sim
