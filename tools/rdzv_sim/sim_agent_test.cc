#include "tools/rdzv_sim/sim_agent.h"

#include "gtest/gtest.h"

namespace ddp::rdzv_sim {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

SimAgent MakeAgent() {
  SimAgentIdentity id;
  id.job_id = "job";
  id.node_id = "sim-00001";
  id.incarnation = 42;
  id.nproc = 8;
  id.master_port_base = 29500;
  return SimAgent(id);
}

// Drives the agent through register + first assignment.
void Assign(SimAgent& agent, int64_t generation, absl::Time at) {
  ASSERT_TRUE(agent.OnAssignment(generation, 0, at).ok());
}

TEST(SimAgent, OnRegistered_AfterRegisterSent_ReturnsRoundTrip) {
  SimAgent agent = MakeAgent();
  agent.OnRegisterSent(kT0);
  absl::StatusOr<absl::Duration> rtt = agent.OnRegistered(kT0 + absl::Milliseconds(3));
  ASSERT_TRUE(rtt.ok());
  EXPECT_EQ(*rtt, absl::Milliseconds(3));
  EXPECT_EQ(agent.phase(), SimAgentPhase::kWaiting);
  EXPECT_TRUE(agent.ShouldHeartbeat());
}

TEST(SimAgent, OnRegistered_Twice_FailedPrecondition) {
  SimAgent agent = MakeAgent();
  ASSERT_TRUE(agent.OnRegistered(kT0).ok());
  EXPECT_EQ(agent.OnRegistered(kT0).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SimAgent, ShouldHeartbeat_BeforeRegistered_False) {
  SimAgent agent = MakeAgent();
  EXPECT_FALSE(agent.ShouldHeartbeat());
  EXPECT_EQ(agent.OnAssignment(1, 0, kT0).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SimAgent, OnRequestMasterInfo_NamesRequestedGenerationAndFreshId) {
  SimAgent agent = MakeAgent();
  ASSERT_TRUE(agent.OnRegistered(kT0).ok());
  absl::StatusOr<MasterInfoReply> first = agent.OnRequestMasterInfo(1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->header.generation, 1);
  EXPECT_EQ(first->header.incarnation, 42u);
  EXPECT_EQ(first->header.node_id, "sim-00001");
  EXPECT_EQ(first->master_port, 29501);
  EXPECT_EQ(first->nccl_unique_id.size(), 128u);
  absl::StatusOr<MasterInfoReply> second = agent.OnRequestMasterInfo(2);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->master_port, 29502);
  EXPECT_NE(second->nccl_unique_id, first->nccl_unique_id);
}

TEST(SimAgent, OnAssignment_CountsGenerationsAndIgnoresDuplicates) {
  SimAgent agent = MakeAgent();
  ASSERT_TRUE(agent.OnRegistered(kT0).ok());
  absl::StatusOr<AssignmentEvent> first = agent.OnAssignment(1, 5, kT0 + absl::Milliseconds(10));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->ordinal, 1);
  EXPECT_FALSE(first->duplicate);
  EXPECT_EQ(first->received, kT0 + absl::Milliseconds(10));
  EXPECT_EQ(agent.group_rank(), 5);
  EXPECT_EQ(agent.Header().generation, 1);

  absl::StatusOr<AssignmentEvent> again = agent.OnAssignment(1, 5, kT0);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->ordinal, 1);

  absl::StatusOr<AssignmentEvent> next = agent.OnAssignment(2, 5, kT0);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->ordinal, 2);
  EXPECT_EQ(agent.assignments(), 2);
}

TEST(SimAgent, OnAssignment_OlderGeneration_Aborted) {
  SimAgent agent = MakeAgent();
  ASSERT_TRUE(agent.OnRegistered(kT0).ok());
  Assign(agent, 3, kT0);
  EXPECT_EQ(agent.OnAssignment(2, 0, kT0).status().code(), absl::StatusCode::kAborted);
}

TEST(SimAgent, OnStopWorkers_RepliesWithOrderGenerationAndStops) {
  SimAgent agent = MakeAgent();
  ASSERT_TRUE(agent.OnRegistered(kT0).ok());
  Assign(agent, 1, kT0);
  absl::StatusOr<NodeHeaderFields> header = agent.OnStopWorkers(1);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->generation, 1);
  EXPECT_EQ(header->job_id, "job");
  EXPECT_EQ(agent.phase(), SimAgentPhase::kStopping);
  EXPECT_TRUE(agent.ShouldHeartbeat());
  EXPECT_EQ(agent.WorkerExitHeader().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SimAgent, WorkerExitHeader_Running_NamesAssignedGeneration) {
  SimAgent agent = MakeAgent();
  ASSERT_TRUE(agent.OnRegistered(kT0).ok());
  EXPECT_FALSE(agent.WorkerExitHeader().ok());
  Assign(agent, 4, kT0);
  absl::StatusOr<NodeHeaderFields> header = agent.WorkerExitHeader();
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->generation, 4);
}

TEST(SimAgent, OnFinished_StopsHeartbeatsAndStreamEndKeepsFinished) {
  SimAgent agent = MakeAgent();
  ASSERT_TRUE(agent.OnRegistered(kT0).ok());
  agent.OnFinished();
  EXPECT_FALSE(agent.ShouldHeartbeat());
  agent.OnStreamFailed();
  EXPECT_EQ(agent.phase(), SimAgentPhase::kFinished);
  EXPECT_EQ(agent.OnStopWorkers(1).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SimAgent, OnStreamFailed_WhileRunning_Failed) {
  SimAgent agent = MakeAgent();
  ASSERT_TRUE(agent.OnRegistered(kT0).ok());
  agent.OnStreamFailed();
  EXPECT_EQ(agent.phase(), SimAgentPhase::kFailed);
  EXPECT_EQ(PhaseName(agent.phase()), "failed");
}

}  // namespace
}  // namespace ddp::rdzv_sim
