// Rendezvous closing rules, master info, assignments and success.

#include "coordinator/rendezvous/job.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using testing::Exit;
using testing::JobHarness;
using testing::MessagesOf;
using testing::NcclId;
using testing::Settings;

TEST(JobRendezvous, MaxNodesJoined_ClosesAtOnce) {
  JobHarness h(Settings(2, 3));
  ASSERT_TRUE(h.Register("a").ok());
  ASSERT_TRUE(h.Register("b").ok());
  EXPECT_EQ(h.job().state(), JobState::kWaiting);
  auto r = h.Register("c");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(h.job().state(), JobState::kStarting);
  EXPECT_EQ(r->role, NodeRole::kMember);
  EXPECT_EQ(h.job().generation(), 1);
  auto requests = MessagesOf<RequestMasterInfo>(h.outbox());
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].generation, 1);
  EXPECT_EQ(MessagesOf<RequestMasterInfo>(h.outbox(), "a").size(), 1u);
}

TEST(JobRendezvous, MinNodesJoined_ClosesAfterLastCall) {
  JobHarness h(Settings(2, 4));
  ASSERT_TRUE(h.Register("a").ok());
  ASSERT_TRUE(h.Register("b").ok());
  for (int i = 0; i < 9; ++i) {  // last call is 5 s
    h.Advance(absl::Milliseconds(500));
    ASSERT_TRUE(h.job().Heartbeat(h.Ref("a")).ok());
    ASSERT_TRUE(h.job().Heartbeat(h.Ref("b")).ok());
  }
  EXPECT_EQ(h.job().state(), JobState::kWaiting);
  h.Advance(absl::Milliseconds(500));
  EXPECT_EQ(h.job().state(), JobState::kStarting);
  EXPECT_EQ(h.job().generation(), 1);
}

TEST(JobRendezvous, BelowMinAtJoinTimeout_JobFails) {
  JobHarness h(Settings(3, 4));
  ASSERT_TRUE(h.Register("a").ok());
  for (int i = 0; i < 119; ++i) {
    h.Advance(absl::Milliseconds(500));
    ASSERT_TRUE(h.job().Heartbeat(h.Ref("a")).ok());
  }
  EXPECT_EQ(h.job().state(), JobState::kWaiting);
  h.Advance(absl::Milliseconds(500));
  EXPECT_EQ(h.job().state(), JobState::kFailed);
  auto finished = MessagesOf<JobFinished>(h.outbox(), "a");
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].state, JobState::kFailed);
  ASSERT_TRUE(finished[0].root_cause.has_value());
  EXPECT_NE(finished[0].root_cause->message().find("1 of min_nodes=3"), std::string::npos);
}

TEST(JobRendezvous, MasterInfo_PushesAssignmentsToEveryMember) {
  JobHarness h(Settings(3, 3));
  ASSERT_TRUE(h.Register("a", 8).ok());
  ASSERT_TRUE(h.Register("b", 2).ok());
  ASSERT_TRUE(h.Register("c", 4).ok());
  ASSERT_TRUE(h.AnswerMasterInfo(29555).ok());
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  auto a = h.LastAssignment("a");
  auto b = h.LastAssignment("b");
  auto c = h.LastAssignment("c");
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->group_rank, 0);
  EXPECT_EQ(b->group_rank, 1);
  EXPECT_EQ(c->group_rank, 2);
  EXPECT_EQ(b->global_rank_offset, 8);
  EXPECT_EQ(c->global_rank_offset, 10);
  EXPECT_EQ(c->local_world_size, 4);
  EXPECT_EQ(a->world_size, 14);
  EXPECT_EQ(a->group_world_size, 3);
  EXPECT_EQ(b->master_addr, "a.example");
  EXPECT_EQ(b->master_port, 29555);
  EXPECT_EQ(b->nccl_unique_id, NcclId());
  EXPECT_EQ(b->generation, 1);
  EXPECT_EQ(b->max_restarts, 3);
  EXPECT_EQ(testing::CountEvents(h.outbox(), JobEvent::GENERATION_OPENED), 1);
}

TEST(JobRendezvous, MasterInfoFromNonRankZero_FailedPrecondition) {
  JobHarness h(Settings(2, 2));
  ASSERT_TRUE(h.Register("a").ok());
  ASSERT_TRUE(h.Register("b").ok());
  absl::Status s = h.job().ReportMasterInfo(h.Ref("b"), NewMasterInfo("", 1234, NcclId()));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobRendezvous, BadMasterInfo_InvalidArgument) {
  JobHarness h(Settings(1, 1));
  ASSERT_TRUE(h.Register("a").ok());
  EXPECT_EQ(h.job().ReportMasterInfo(h.Ref("a"), NewMasterInfo("", 0, NcclId())).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.job().ReportMasterInfo(h.Ref("a"), NewMasterInfo("", 80, "short")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.job().state(), JobState::kStarting);
}

TEST(JobRendezvous, MasterInfoWithoutNcclId_AssignsWithEmptyId) {
  // A rank-0 node without NCCL installed sends no id; the job still runs.
  JobHarness h(Settings(2, 2));
  ASSERT_TRUE(h.Register("a").ok());
  ASSERT_TRUE(h.Register("b").ok());
  ASSERT_TRUE(h.job().ReportMasterInfo(h.Ref("a"), NewMasterInfo("", 29600, "")).ok());
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  auto b = h.LastAssignment("b");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->master_port, 29600);
  EXPECT_TRUE(b->nccl_unique_id.empty());
}

TEST(JobRendezvous, RankZeroSilent_DeclaredDeadAndReformed) {
  JobHarness h(Settings(2, 3));
  ASSERT_TRUE(h.Register("a").ok());
  ASSERT_TRUE(h.Register("b").ok());
  ASSERT_TRUE(h.Register("c").ok());
  ASSERT_EQ(h.job().state(), JobState::kStarting);
  for (int i = 0; i < 20; ++i) {  // shutdown_timeout = 10 s; all heartbeat
    h.clock().Advance(absl::Milliseconds(500));
    for (const char* n : {"a", "b", "c"}) (void)h.job().Heartbeat(h.Ref(n));
    h.job().Tick();
  }
  EXPECT_EQ(h.job().generation(), 2);
  EXPECT_EQ(h.job().state(), JobState::kStarting);
  EXPECT_EQ(h.job().registered_nodes(), 2);
  EXPECT_EQ(MessagesOf<RequestMasterInfo>(h.outbox()).back().generation, 2);
}

TEST(JobRendezvous, RankZeroSilent_RemovalNamesTheNodeInTheEventAndTheStore) {
  JobHarness h(Settings(2, 3));
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(h.Register(n).ok());
  (void)h.job().TakeChanges();
  for (int i = 0; i < 20 && h.job().generation() == 1; ++i) {
    h.clock().Advance(absl::Milliseconds(500));
    for (const char* n : {"a", "b", "c"}) (void)h.job().Heartbeat(h.Ref(n));
    h.job().Tick();
  }
  ASSERT_EQ(h.job().registered_nodes(), 2);
  std::string lost;
  for (const JobEvent& e : h.outbox().events) {
    if (e.type() == JobEvent::NODE_LOST) lost = e.node_id();
  }
  EXPECT_FALSE(lost.empty());
  JobChanges changes = h.job().TakeChanges();
  EXPECT_EQ(changes.removed_nodes, std::vector<std::string>{lost})
      << "the declared-dead rank 0 leaves the store too";
}

TEST(JobRendezvous, BeyondMax_HotSpareWaits) {
  JobHarness h(Settings(2, 2));
  ASSERT_TRUE(h.Register("a").ok());
  ASSERT_TRUE(h.Register("b").ok());
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  auto r = h.Register("spare");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->role, NodeRole::kWaiting);
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  EXPECT_EQ(h.job().generation(), 1);
  EXPECT_FALSE(h.LastAssignment("spare").has_value());
}

TEST(JobRendezvous, EveryWorkerExitsZero_Succeeds) {
  JobHarness h(Settings(2, 2));
  ASSERT_TRUE(h.Register("a", 2).ok());
  ASSERT_TRUE(h.Register("b", 3).ok());
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  ASSERT_TRUE(h.Succeed("a", 2).ok());
  // A repeated report does not count twice.
  ASSERT_TRUE(h.Succeed("a", 2).ok());
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), Exit(0, 0, 0, "", {})).ok());
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), Exit(1, 0, 0, "", {})).ok());
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), Exit(2, 0, 0, "", {})).ok());
  EXPECT_EQ(h.job().state(), JobState::kSucceeded);
  auto finished = MessagesOf<JobFinished>(h.outbox(), "b");
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].state, JobState::kSucceeded);
}

TEST(JobRendezvous, WorkerExitWithBadLocalRank_InvalidArgument) {
  JobHarness h(Settings(1, 1));
  ASSERT_TRUE(h.Register("a", 2).ok());
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.job().WorkerExited(h.Ref("a"), Exit(2, 0, 0, "", {})).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(JobRendezvous, RequestedNodeRanks_Honoured) {
  JobHarness h(Settings(2, 2));
  ASSERT_TRUE(h.Register("a", 0, 1).ok());
  ASSERT_TRUE(h.Register("b", 0, 0).ok());
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("b")->group_rank, 0);
  EXPECT_EQ(h.LastAssignment("a")->group_rank, 1);
  EXPECT_EQ(h.LastAssignment("a")->master_addr, "b.example");
}

TEST(JobRendezvous, EventsSince_ReturnsNumberedEvents) {
  JobHarness h(Settings(1, 1));
  ASSERT_TRUE(h.Register("a").ok());
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  auto events = h.job().EventsSince(0, 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].type(), JobEvent::JOB_CREATED);
  EXPECT_EQ((*events)[1].type(), JobEvent::NODE_JOINED);
  EXPECT_EQ((*events)[2].type(), JobEvent::GENERATION_OPENED);
  EXPECT_EQ((*events)[2].index(), 3);
  auto later = h.job().EventsSince(2, 100);
  ASSERT_TRUE(later.ok());
  ASSERT_EQ(later->size(), 1u);
  EXPECT_EQ((*later)[0].index(), 3);
}

TEST(JobRendezvous, EventsDropped_OutOfRange) {
  RendezvousLimits limits;
  limits.max_retained_events = 2;
  JobHarness h(Settings(1, 4), limits);
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(h.Register(n).ok());
  EXPECT_EQ(h.job().EventsSince(0, 10).status().code(), absl::StatusCode::kOutOfRange);
  auto tail = h.job().EventsSince(2, 10);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->size(), 2u);
}

}  // namespace
}  // namespace ddp::rendezvous
