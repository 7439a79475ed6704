#include "tools/continuity_bench/agent_log.h"

#include "gtest/gtest.h"

namespace ddp::continuity_bench {
namespace {

absl::Time At(const char* text) {
  absl::Time t;
  std::string error;
  EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, text, &t, &error)) << error;
  return t;
}

TEST(LineTimeTest, AgentLine_ParsesMicroseconds) {
  EXPECT_EQ(LineTime("2026-11-23T00:55:26.123456Z I client/agent/x.cc:1] hello"),
            At("2026-11-23T00:55:26.123456Z"));
}

TEST(LineTimeTest, WorkerLine_InfinitePast) {
  EXPECT_EQ(LineTime("[default0]:step 10 loss 0.1"), absl::InfinitePast());
  EXPECT_EQ(LineTime(""), absl::InfinitePast());
}

TEST(ScanAgentLogTest, ContinuityLines_EachCounted) {
  const std::string log =
      "2026-11-23T00:00:01.000000Z I client/agent/grpc_session_client.cc:338] registered with "
      "the coordinator at 127.0.0.1:5 (incarnation 1): job_id: \"j\"\n"
      "[default0]:rank 0/4 local_rank 0 restart 0 generation 1 backend gloo\n"
      "[default1]:rank 1/4 local_rank 1 restart 0 generation 1 backend gloo\n"
      "[default0]:step 0 loss 0.50000\n"
      "[default0]:step 10 loss 0.40000\n"
      "2026-11-23T00:00:05.000000Z E client/agent/worker_lease.cc:181] lease of generation 1 "
      "ran out: no heartbeat acknowledged by the coordinator for 2.1s (...); froze the workers "
      "(SIGSTOP) until the coordinator confirms generation 1 is still current (then ...)\n"
      "2026-11-23T00:00:08.500000Z I client/agent/grpc_session_client.cc:338] session resumed "
      "with the coordinator at 127.0.0.1:5 (incarnation 1): job_id: \"j\"\n"
      "2026-11-23T00:00:08.600000Z W client/agent/worker_lease.cc:189] generation 1 is still "
      "current: thawed the workers (SIGCONT) after 3.5s frozen\n"
      "[default0]:step 20 loss 0.30000\n"
      "[default0]:rank 0 done, params sha256 0123456789abcdef\n";
  const AgentLogEvents events = ScanAgentLog(log);
  ASSERT_EQ(events.registered.size(), 1u);
  EXPECT_EQ(events.registered[0], At("2026-11-23T00:00:01Z"));
  ASSERT_EQ(events.resumed.size(), 1u);
  EXPECT_EQ(events.resumed[0], At("2026-11-23T00:00:08.5Z"));
  ASSERT_EQ(events.froze.size(), 1u);
  EXPECT_EQ(events.froze[0], At("2026-11-23T00:00:05Z"));
  ASSERT_EQ(events.thawed.size(), 1u);
  EXPECT_EQ(events.thawed[0].at, At("2026-11-23T00:00:08.6Z"));
  EXPECT_EQ(events.thawed[0].frozen_for, absl::Milliseconds(3500));
  ASSERT_EQ(events.worker_starts.size(), 2u);
  EXPECT_EQ(events.worker_starts[1].rank, 1);
  EXPECT_EQ(events.worker_starts[1].world_size, 4);
  EXPECT_EQ(events.worker_starts[1].restart, 0);
  EXPECT_EQ(events.worker_starts[1].generation, 1);
  EXPECT_EQ(events.last_step, 20);
  EXPECT_EQ(events.ranks_done, 1);
}

TEST(ScanAgentLogTest, OtherRankLines_NotWorkerStarts) {
  const AgentLogEvents events = ScanAgentLog(
      "[default0]:rank 0 resumed from step 5\n"
      "  node-b rank 3 (local_rank 1): signal SIGKILL: generation 2\n");
  EXPECT_TRUE(events.worker_starts.empty());
  EXPECT_EQ(events.last_step, -1);
}

}  // namespace
}  // namespace ddp::continuity_bench
