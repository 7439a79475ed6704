// Integration tests of the Session stream over real gRPC: fake agents against
// an in-process server on port 0.

#include <set>

#include "coordinator/session/testing/job_services_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

using ::ddp::session::testing::FakeAgent;
using ::ddp::session::testing::FakeAgentOptions;
using ::ddp::session::testing::FastSettings;
using ::ddp::session::testing::kWait;
using ::testing::HasSubstr;

class SessionServiceTest : public testing::JobServicesTest {
 protected:
  // Registers `n` agents node-0..node-(n-1) of `job` and waits for their
  // generation-1 assignments.
  std::vector<FakeAgent*> StartJob(const std::string& job, int n, const v1::JobSettings& settings) {
    std::vector<FakeAgent*> agents;
    for (int i = 0; i < n; ++i) {
      FakeAgent& a = MakeAgent(job, "node-" + std::to_string(i), settings);
      EXPECT_TRUE(a.Register(kWait).ok());
      agents.push_back(&a);
    }
    for (FakeAgent* a : agents) EXPECT_TRUE(a->WaitForAssignment(1, kWait).ok());
    return agents;
  }
};

TEST_F(SessionServiceTest, Session_TwoNodes_RunToSuccess) {
  FakeAgent& a = MakeAgent("job", "a", FastSettings(2, 2, 3, 2));
  FakeAgent& b = MakeAgent("job", "b", FastSettings(2, 2, 3, 2));
  absl::StatusOr<v1::Registered> ra = a.Register(kWait);
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_TRUE(ra->created_job());
  EXPECT_EQ(ra->role(), v1::MEMBER);
  absl::StatusOr<v1::Registered> rb = b.Register(kWait);
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_FALSE(rb->created_job());

  absl::StatusOr<v1::Assignment> aa = a.WaitForAssignment(1, kWait);
  absl::StatusOr<v1::Assignment> ab = b.WaitForAssignment(1, kWait);
  ASSERT_TRUE(aa.ok()) << aa.status();
  ASSERT_TRUE(ab.ok()) << ab.status();
  EXPECT_EQ(aa->generation(), 1);
  EXPECT_EQ(aa->group_world_size(), 2);
  EXPECT_EQ(aa->world_size(), 4);
  EXPECT_EQ(aa->local_world_size(), 2);
  EXPECT_EQ(aa->group_rank() + ab->group_rank(), 1);
  EXPECT_EQ(aa->global_rank_offset() + ab->global_rank_offset(), 2);
  EXPECT_EQ(aa->master_port(), 29500);
  EXPECT_EQ(aa->master_addr(), "127.0.0.1");
  EXPECT_EQ(aa->nccl_unique_id().size(), 128u);
  EXPECT_EQ(aa->nccl_unique_id(), ab->nccl_unique_id());
  EXPECT_EQ(a.master_info_requests() + b.master_info_requests(), 1);

  a.ReportAllExitedOk();
  b.ReportAllExitedOk();
  for (FakeAgent* agent : {&a, &b}) {
    absl::StatusOr<v1::JobFinished> finished = agent->WaitForJobFinished(kWait);
    ASSERT_TRUE(finished.ok()) << finished.status();
    EXPECT_EQ(finished->state(), v1::SUCCEEDED);
  }
  EXPECT_EQ(GetJob("job").state(), v1::SUCCEEDED);
}

TEST_F(SessionServiceTest, WorkerFailure_EightNodes_NewGenerationAfterAllStop) {
  v1::JobSettings settings = FastSettings(8, 8, 3);
  std::vector<FakeAgent*> agents;
  for (int i = 0; i < 8; ++i) {
    FakeAgentOptions options;
    options.job_id = "job8";
    options.node_id = "node-" + std::to_string(i);
    options.settings = settings;
    options.confirm_stops = i != 7;  // node-7 confirms by hand, late
    agents.push_back(&MakeAgent(options));
    ASSERT_TRUE(agents.back()->Register(kWait).ok());
  }
  for (FakeAgent* a : agents) ASSERT_TRUE(a->WaitForAssignment(1, kWait).ok());

  agents[3]->ReportExit(0, 1, 0, "boom");
  for (FakeAgent* a : agents) ASSERT_TRUE(a->WaitForStops(1, kWait));
  ASSERT_EQ(agents[7]->stops().size(), 1u);
  // A bounded observation window: without node-7's confirmation nothing of
  // generation 2 may start anywhere.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(GetJob("job8").state(), v1::RESTARTING);
  for (FakeAgent* a : agents) {
    EXPECT_EQ(a->assignments().back().generation(), 1);
    EXPECT_EQ(a->stops().size(), 1u);
  }
  v1::AgentMessage confirm;
  *confirm.mutable_workers_stopped()->mutable_header() = agents[7]->Header();
  ASSERT_TRUE(agents[7]->Send(confirm));

  for (FakeAgent* a : agents) {
    absl::StatusOr<v1::Assignment> next = a->WaitForAssignment(2, kWait);
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(next->generation(), 2);
    EXPECT_EQ(next->restart_count(), 1);
    EXPECT_EQ(next->max_restarts(), 3);
    EXPECT_EQ(next->group_world_size(), 8);
  }
}

TEST_F(SessionServiceTest, WorkerFailure_BudgetSpent_EveryAgentGetsRootCause) {
  std::vector<FakeAgent*> agents = StartJob("budget", 2, FastSettings(2, 2, 0));
  agents[1]->ReportExit(0, 3, 0, "CUDA error");
  for (FakeAgent* a : agents) {
    absl::StatusOr<v1::JobFinished> finished = a->WaitForJobFinished(kWait);
    ASSERT_TRUE(finished.ok()) << finished.status();
    EXPECT_EQ(finished->state(), v1::FAILED);
    EXPECT_EQ(finished->root_cause().node_id(), "node-1");
    EXPECT_EQ(finished->root_cause().exit_code(), 3);
    EXPECT_EQ(finished->root_cause().message(), "CUDA error");
    EXPECT_THAT(finished->message(), HasSubstr("max_restarts=0"));
  }
}

TEST_F(SessionServiceTest, StreamClosedWithoutLeave_NodeLost_NewGeneration) {
  std::vector<FakeAgent*> agents = StartJob("loss", 2, FastSettings(1, 2));
  FakeAgent* survivor = agents[0];
  FakeAgent* lost = agents[1];
  lost->Disconnect();
  absl::StatusOr<v1::Assignment> next = survivor->WaitForAssignment(2, kWait);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->group_world_size(), 1);
  EXPECT_EQ(next->restart_count(), 0);  // membership changes are free
  v1::Job job = GetJob("loss");
  ASSERT_EQ(job.members_size(), 1);
  EXPECT_EQ(job.members(0).node_id(), "node-0");
}

TEST_F(SessionServiceTest, Rendezvous_SixtyFourNodes_DistinctRanks) {
  std::vector<FakeAgent*> agents = StartJob("big", 64, FastSettings(64, 64));
  std::set<int> ranks;
  for (FakeAgent* a : agents) {
    v1::Assignment assignment = a->assignments().back();
    EXPECT_EQ(assignment.generation(), 1);
    EXPECT_EQ(assignment.world_size(), 64);
    ranks.insert(assignment.group_rank());
  }
  EXPECT_EQ(ranks.size(), 64u);
  EXPECT_EQ(*ranks.rbegin(), 63);
  EXPECT_EQ(services_->open_sessions(), 64);
}

TEST_F(SessionServiceTest, FirstMessageNotRegister_FailedPrecondition) {
  FakeAgent& a = MakeAgent("job", "a", FastSettings(1, 1));
  v1::AgentMessage heartbeat;
  *heartbeat.mutable_heartbeat()->mutable_header() = a.Header();
  a.OpenAndSend(heartbeat);
  absl::StatusOr<grpc::Status> end = a.WaitForStreamEnd(kWait);
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(end->error_message(), HasSubstr("register first"));
}

TEST_F(SessionServiceTest, StaleGeneration_Aborted) {
  std::vector<FakeAgent*> agents = StartJob("stale", 1, FastSettings(1, 1));
  v1::AgentMessage exit;
  *exit.mutable_worker_exited()->mutable_header() = agents[0]->Header();
  exit.mutable_worker_exited()->mutable_header()->set_generation(0);
  exit.mutable_worker_exited()->set_exit_code(1);
  ASSERT_TRUE(agents[0]->Send(exit));
  absl::StatusOr<grpc::Status> end = agents[0]->WaitForStreamEnd(kWait);
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(end->error_message(), HasSubstr("stale"));
}

// Two live agents with one node id (two agents on one host, containers that
// share a hostname): the second is refused at once, naming the id and the
// flag; the first keeps its session. Before, they fenced each other forever.
TEST_F(SessionServiceTest, LiveDuplicateNodeId_SecondAgentRefusedAtOnce) {
  FakeAgent& first = MakeAgent("dup2", "n", FastSettings(1, 2), 1);
  ASSERT_TRUE(first.Register(kWait).ok());
  FakeAgent& second = MakeAgent("dup2", "n", FastSettings(1, 2), 2);
  absl::StatusOr<v1::Registered> refused = second.Register(kWait);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("node id 'n'"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--node-id"));
  EXPECT_FALSE(first.WaitForStreamEnd(absl::Milliseconds(300)).ok());  // still open
  v1::Job job = GetJob("dup2");
  ASSERT_EQ(job.members_size() + job.spares_size(), 1);
  EXPECT_EQ((job.members_size() > 0 ? job.members(0) : job.spares(0)).incarnation(), 1u);
}

// An agent that crashed (its stream broke) and was started again: the new
// incarnation replaces the old one.
TEST_F(SessionServiceTest, NewerIncarnationAfterCrash_ReplacesOlder) {
  FakeAgent& old_agent = MakeAgent("dup", "n", FastSettings(1, 2), 1);
  ASSERT_TRUE(old_agent.Register(kWait).ok());
  old_agent.Disconnect();
  FakeAgent& new_agent = MakeAgent("dup", "n", FastSettings(1, 2), 2);
  absl::StatusOr<v1::Registered> registered = new_agent.Register(kWait);
  for (int i = 0;
       i < 50 && !registered.ok() && registered.status().code() == absl::StatusCode::kAlreadyExists;
       ++i) {
    // The coordinator may not have seen the broken stream yet.
    absl::SleepFor(absl::Milliseconds(100));
    FakeAgent& retry = MakeAgent("dup", "n", FastSettings(1, 2), 3 + i);
    registered = retry.Register(kWait);
  }
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_FALSE(registered->resumed());
  v1::Job job = GetJob("dup");
  ASSERT_EQ(job.members_size() + job.spares_size(), 1);
  EXPECT_NE((job.members_size() > 0 ? job.members(0) : job.spares(0)).incarnation(), 1u);
}

TEST_F(SessionServiceTest, SameIncarnation_ResumesOnNewStream) {
  std::vector<FakeAgent*> agents = StartJob("resume", 1, FastSettings(1, 1));
  FakeAgent& again = MakeAgent("resume", "node-0", FastSettings(1, 1), 1);
  absl::StatusOr<v1::Registered> registered = again.Register(kWait);
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_TRUE(registered->resumed());
  // The core re-sends the running assignment to the resumed session.
  absl::StatusOr<v1::Assignment> assignment = again.WaitForAssignment(1, kWait);
  ASSERT_TRUE(assignment.ok()) << assignment.status();
  EXPECT_EQ(assignment->generation(), 1);
  absl::StatusOr<grpc::Status> end = agents[0]->WaitForStreamEnd(kWait);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->error_code(), grpc::StatusCode::ABORTED);
}

TEST_F(SessionServiceTest, Register_InvalidSettings_InvalidArgument) {
  v1::JobSettings bad = FastSettings(3, 2);  // min > max
  FakeAgent& a = MakeAgent("bad", "a", bad);
  absl::StatusOr<v1::Registered> registered = a.Register(kWait);
  EXPECT_EQ(registered.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SessionServiceTest, Register_OversizedNodeId_InvalidArgument) {
  FakeAgent& a = MakeAgent("job", std::string(5000, 'x'), FastSettings(1, 1));
  absl::StatusOr<v1::Registered> registered = a.Register(kWait);
  EXPECT_EQ(registered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(registered.status().message(), HasSubstr("5000 bytes"));
}

TEST_F(SessionServiceTest, MasterInfo_WrongNcclIdSize_InvalidArgument) {
  FakeAgentOptions options;
  options.job_id = "nccl";
  options.node_id = "a";
  options.settings = FastSettings(1, 1);
  options.answer_master_info = false;
  FakeAgent& a = MakeAgent(options);
  ASSERT_TRUE(a.Register(kWait).ok());
  ASSERT_TRUE(a.WaitForMasterInfoRequest(kWait));
  v1::AgentMessage info;
  *info.mutable_master_info()->mutable_header() = a.Header();
  info.mutable_master_info()->set_master_port(1234);
  info.mutable_master_info()->set_nccl_unique_id(std::string(100, 'x'));
  ASSERT_TRUE(a.Send(info));
  absl::StatusOr<grpc::Status> end = a.WaitForStreamEnd(kWait);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(end->error_message(), HasSubstr("100 bytes"));
}

TEST_F(SessionServiceTest, Leave_EndsStreamOkAndRemovesNode) {
  std::vector<FakeAgent*> agents = StartJob("leave", 2, FastSettings(1, 2));
  agents[1]->Leave("maintenance");
  absl::StatusOr<grpc::Status> end = agents[1]->WaitForStreamEnd(kWait);
  ASSERT_TRUE(end.ok());
  EXPECT_TRUE(end->ok()) << end->error_message();
  ASSERT_TRUE(agents[0]->WaitForAssignment(2, kWait).ok());
  EXPECT_EQ(GetJob("leave").members_size(), 1);
}

}  // namespace
}  // namespace ddp::session
