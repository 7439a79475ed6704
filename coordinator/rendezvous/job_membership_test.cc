// Registration, fencing, node loss, spares, arrivals and scheduler operations.

#include "coordinator/rendezvous/job.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using testing::Exit;
using testing::JobHarness;
using testing::MessagesOf;
using testing::Settings;
using testing::StartRunning;

// Brings a job with the given nodes to RUNNING at generation 1.

void HeartbeatAll(JobHarness& h, const std::vector<std::string>& nodes, absl::Duration total) {
  for (absl::Duration t; t < total; t += absl::Milliseconds(500)) {
    h.clock().Advance(absl::Milliseconds(500));
    for (const std::string& n : nodes) (void)h.job().Heartbeat(h.Ref(n));
    h.job().Tick();
  }
}

// Issue 29, point 7: `--nnodes 2`, Ctrl-C while waiting: the job ends, so a
// rerun of its id with other settings is not held to the old ones.
TEST(JobMembership, EveryAgentLeftBeforeFirstGeneration_JobEndsAbandoned) {
  JobHarness h(Settings(3, 3));  // two of three: still waiting
  ASSERT_TRUE(h.Register("a").ok());
  ASSERT_TRUE(h.Register("b").ok());
  ASSERT_TRUE(h.job().Leave(h.Ref("a")).ok());
  EXPECT_EQ(h.job().state(), JobState::kWaiting);  // b still waits
  ASSERT_TRUE(h.job().Leave(h.Ref("b")).ok());
  EXPECT_EQ(h.job().state(), JobState::kCancelled);
  EXPECT_NE(h.job().Status(false).message().find("abandoned"), std::string::npos);
}

// A job that had a generation, or that nobody joined yet, does not end so.
TEST(JobMembership, LastAgentLeavesAfterFirstGeneration_JobKeepsWaiting) {
  JobHarness h(Settings(1, 1));
  StartRunning(h, {"a"});
  ASSERT_TRUE(h.job().Leave(h.Ref("a")).ok());
  EXPECT_FALSE(IsTerminal(h.job().state()));
}

TEST(JobMembership, BadRegistration_InvalidArgument) {
  JobHarness h(Settings(1, 2));
  EXPECT_EQ(h.Register("bad id").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.Register("a", 5000).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.Register("a", 1, 2).status().code(),  // rank 2 with max 2
            absl::StatusCode::kInvalidArgument);
  RegisterRequest r;
  r.job_id = "job1";
  r.node_id = "a";
  r.incarnation = 0;
  EXPECT_EQ(h.job().Register(r).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.job().registered_nodes(), 0);
}

TEST(JobMembership, ContradictingSettings_FailedPrecondition) {
  JobHarness h(Settings(2, 4));
  RegisterRequest r;
  r.job_id = "job1";
  r.node_id = "a";
  r.incarnation = 5;
  r.settings = Settings(2, 8);
  auto result = h.job().Register(r);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(result.status().message().find("max_nodes=8"), std::string::npos);
  EXPECT_NE(result.status().message().find("max_nodes=4"), std::string::npos);
  r.settings = Settings(2, 4);
  r.settings->set_nproc_per_node(7);  // own process count is fine
  EXPECT_TRUE(h.job().Register(r).ok());
}

// The node already waiting hears of the conflict at once (a Notice), instead
// of waiting silently until the join timeout.
TEST(JobMembership, ContradictingSettings_NodesAlreadyThereGetANotice) {
  JobHarness h(Settings(2, 4));
  ASSERT_TRUE(h.Register("a").ok());
  h.ClearOutbox();
  RegisterRequest r;
  r.job_id = "job1";
  r.node_id = "b";
  r.incarnation = 5;
  r.settings = Settings(3, 4);
  EXPECT_EQ(h.job().Register(r).status().code(), absl::StatusCode::kFailedPrecondition);
  auto notices = MessagesOf<Notice>(h.outbox(), "a");
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].message.find("min_nodes=3"), std::string::npos) << notices[0].message;
  EXPECT_NE(notices[0].message.find("node 'b'"), std::string::npos) << notices[0].message;
  // A launcher retrying in a loop does not flood the others.
  EXPECT_FALSE(h.job().Register(r).ok());
  EXPECT_EQ(MessagesOf<Notice>(h.outbox(), "a").size(), 1u);
}

TEST(JobMembership, Roles_RoleRanksCountedPerRoleInGroupRankOrder) {
  JobHarness h(Settings(3, 3));
  auto join = [&](const std::string& node, const std::string& role, int nproc, int rank) {
    RegisterRequest r;
    r.job_id = "job1";
    r.node_id = node;
    r.incarnation = JobHarness::IncarnationOf(node);
    r.nproc = nproc;
    r.requested_rank = rank;
    r.address = node + ".example";
    r.role = role;
    ASSERT_TRUE(h.job().Register(r).ok());
  };
  join("a", "trainer", 2, 0);
  join("b", "reader", 1, 1);
  join("c", "trainer", 2, 2);
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("a")->role_rank_offset, 0);
  EXPECT_EQ(h.LastAssignment("a")->role_world_size, 4);
  EXPECT_EQ(h.LastAssignment("b")->role_rank_offset, 0);
  EXPECT_EQ(h.LastAssignment("b")->role_world_size, 1);
  EXPECT_EQ(h.LastAssignment("c")->role_rank_offset, 2);
  EXPECT_EQ(h.LastAssignment("c")->role_world_size, 4);
}

TEST(JobMembership, StaleGeneration_Aborted) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  NodeRef stale = h.Ref("a");
  stale.generation = 0;
  EXPECT_EQ(h.job().WorkerExited(stale, Exit(0, 1, 0, "", {})).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(h.job().WorkersStopped(stale).code(), absl::StatusCode::kAborted);
  NodeRef future = h.Ref("a");
  future.generation = 9;
  EXPECT_EQ(h.job().Heartbeat(future).status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(h.job().Heartbeat(stale).ok());  // liveness only needs incarnation
  EXPECT_EQ(h.job().restart_count(), 0);
  EXPECT_EQ(h.job().state(), JobState::kRunning);
}

TEST(JobMembership, UnknownNode_Aborted) {
  JobHarness h(Settings(1, 2));
  EXPECT_EQ(h.job().Heartbeat(h.Ref("ghost")).status().code(), absl::StatusCode::kAborted);
}

TEST(JobMembership, NewIncarnationOfMember_FencesOldAndRestarts) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  // b's agent went silent (hung, its stream still open); a new one starts.
  h.clock().Advance(absl::Seconds(1));
  ASSERT_TRUE(h.job().Heartbeat(h.Ref("a")).ok());
  ASSERT_TRUE(h.Register("b", 0, -1, /*version=*/2).ok());
  EXPECT_EQ(h.job().Heartbeat(h.Ref("b", 1)).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_EQ(h.job().restart_count(), 1);  // counts as a failure of the node
  auto stops = MessagesOf<StopWorkers>(h.outbox(), "b");
  ASSERT_EQ(stops.size(), 1u);
  h.ConfirmStops();
  // The old agent may be alive but cut off: its workers may run until its
  // lease runs out, heartbeat_timeout after its last heartbeat (1 s ago).
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  h.clock().Advance(absl::Seconds(2));
  h.job().Tick();
  EXPECT_EQ(h.job().state(), JobState::kStarting);
  EXPECT_EQ(h.job().generation(), 2);
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("b")->group_rank, 1);  // sticky
  EXPECT_EQ(h.LastAssignment("b")->restart_count, 1);
}

TEST(JobMembership, SecondLiveAgentWithSameNodeId_AlreadyExistsNamingTheFlag) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  absl::StatusOr<RegisterResult> second = h.Register("b", 0, -1, /*version=*/2);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists) << second.status();
  EXPECT_NE(second.status().message().find("--node-id"), absl::string_view::npos);
  EXPECT_TRUE(h.job().Heartbeat(h.Ref("b", 1)).ok());  // the first keeps its place
  EXPECT_EQ(h.job().state(), JobState::kRunning);
}

TEST(JobMembership, SameIncarnationRegistersAgain_ResumesWithoutRestart) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().StreamClosed(h.Ref("b")).ok());
  h.clock().Advance(absl::Seconds(2));
  h.ClearOutbox();
  auto r = h.Register("b");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->resumed);
  EXPECT_EQ(r->generation, 1);
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  ASSERT_TRUE(h.LastAssignment("b").has_value());  // re-sent, same generation
  EXPECT_EQ(h.LastAssignment("b")->generation, 1);
}

TEST(JobMembership, StreamClosedNotResumed_NodeLostAndRestartWithoutIt) {
  JobHarness h(Settings(2, 3));
  StartRunning(h, {"a", "b", "c"});
  ASSERT_TRUE(h.job().StreamClosed(h.Ref("c")).ok());
  HeartbeatAll(h, {"a", "b"}, absl::Seconds(3));
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_EQ(h.job().registered_nodes(), 2);
  EXPECT_EQ(h.job().restart_count(), 0);  // membership change: free
  h.ConfirmStops();
  EXPECT_EQ(h.job().state(), JobState::kStarting);  // min remains: at once
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("a")->group_world_size, 2);
  EXPECT_EQ(h.LastAssignment("a")->group_rank, 0);
  EXPECT_EQ(h.LastAssignment("b")->group_rank, 1);
}

TEST(JobMembership, MemberLostWithSpare_SparePromoted) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.Register("spare").ok());
  HeartbeatAll(h, {"b", "spare"}, absl::Seconds(3));  // a goes silent
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  h.ConfirmStops();
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.job().generation(), 2);
  ASSERT_TRUE(h.LastAssignment("spare").has_value());
  EXPECT_EQ(h.LastAssignment("spare")->group_rank, 0);  // fills the hole
  EXPECT_EQ(h.LastAssignment("b")->group_rank, 1);      // sticky
}

TEST(JobMembership, BelowMinAfterLoss_WaitsForNodes) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  HeartbeatAll(h, {"a"}, absl::Seconds(3));
  h.ConfirmStops();
  EXPECT_EQ(h.job().state(), JobState::kWaiting);
  ASSERT_TRUE(h.Register("c").ok());  // max reached: closes at once
  EXPECT_EQ(h.job().state(), JobState::kStarting);
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("a")->group_rank, 0);
  EXPECT_EQ(h.LastAssignment("c")->group_rank, 1);
}

TEST(JobMembership, BelowMinAfterLoss_FailsAfterJoinTimeout) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  HeartbeatAll(h, {"a"}, absl::Seconds(3));
  h.ConfirmStops();
  ASSERT_EQ(h.job().state(), JobState::kWaiting);
  HeartbeatAll(h, {"a"}, absl::Seconds(60));
  EXPECT_EQ(h.job().state(), JobState::kFailed);
}

TEST(JobMembership, ArrivalWhileRunningBelowMax_NewGenerationIncludesIt) {
  JobHarness h(Settings(1, 3));
  ASSERT_TRUE(h.Register("a").ok());
  HeartbeatAll(h, {"a"}, absl::Seconds(5));  // last call
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  ASSERT_EQ(h.job().state(), JobState::kRunning);
  ASSERT_TRUE(h.Register("b").ok());
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  h.ConfirmStops();
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.job().generation(), 2);
  EXPECT_EQ(h.LastAssignment("b")->group_rank, 1);
  EXPECT_EQ(h.LastAssignment("a")->restart_count, 0);
}

TEST(JobMembership, Leave_RemovesAtOnceAndRestarts) {
  JobHarness h(Settings(1, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().Leave(h.Ref("a")).ok());
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  h.ConfirmStops();
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("b")->group_rank,
            0);  // rank 0 moved: its node left
}

TEST(JobMembership, ExcludeNode_DismissedRestartedAndCannotRejoin) {
  JobHarness h(Settings(1, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().ExcludeNode("b", "bad GPU").ok());
  auto dismissed = MessagesOf<NodeDismissed>(h.outbox(), "b");
  ASSERT_EQ(dismissed.size(), 1u);
  EXPECT_NE(dismissed[0].reason.find("bad GPU"), std::string::npos);
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  h.ConfirmStops();
  // b is dismissed, but its workers stop for sure only when its lease runs out.
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  for (int i = 0; i < 6; ++i) {
    h.clock().Advance(absl::Milliseconds(500));
    ASSERT_TRUE(h.job().Heartbeat(h.Ref("a")).ok());
    h.job().Tick();
  }
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("a")->group_world_size, 1);
  EXPECT_EQ(h.Register("b", 0, -1, 2).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.job().Heartbeat(h.Ref("b")).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobMembership, UpdateJobShrink_RestartsAndKeepsLowRanks) {
  JobHarness h(Settings(1, 3));
  StartRunning(h, {"a", "b", "c"});
  ASSERT_TRUE(h.job().Update(1, 2).ok());
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  h.ConfirmStops();
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("a")->group_world_size, 2);
  EXPECT_EQ(h.job().Status(true).spares_size(), 1);  // c is now a spare
  EXPECT_EQ(h.job().Status(false).member_count(), 2);
}

TEST(JobMembership, UpdateJobGrowWithSpare_RestartsIncludingSpare) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.Register("c").ok());
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  ASSERT_TRUE(h.job().Update(2, 3).ok());
  h.ConfirmStops();
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("c")->group_rank, 2);
}

TEST(JobMembership, UpdateJobNoMembershipChange_NoRestart) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().Update(1, 4).ok());
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  EXPECT_EQ(h.job().Update(3, 2).code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobMembership, Cancel_EveryNodeGetsJobFinished) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.Register("spare").ok());
  ASSERT_TRUE(h.job().Cancel("user asked").ok());
  EXPECT_EQ(h.job().state(), JobState::kCancelled);
  for (const char* n : {"a", "b", "spare"}) {
    auto f = MessagesOf<JobFinished>(h.outbox(), n);
    ASSERT_EQ(f.size(), 1u) << n;
    EXPECT_EQ(f[0].state, JobState::kCancelled);
  }
  EXPECT_EQ(h.job().Cancel("again").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.Register("late").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobMembership, TooManyNodes_ResourceExhausted) {
  RendezvousLimits limits;
  limits.max_spare_nodes = 1;
  JobHarness h(Settings(1, 1), limits);
  ASSERT_TRUE(h.Register("a").ok());
  ASSERT_TRUE(h.Register("b").ok());
  EXPECT_EQ(h.Register("c").status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace ddp::rendezvous

namespace ddp::rendezvous {
namespace {

// Progress reports replace the node's earlier ones, sorted by local rank,
// tagged with the node's generation; shown in Status; fenced like heartbeats.
TEST(JobMembership, ReportProgress_ShownInStatusFencedLikeHeartbeats) {
  JobHarness h(Settings(1, 1));
  StartRunning(h, {"a"});
  WorkerProgress second;
  second.local_rank = 1;
  second.step = 20;
  WorkerProgress first;
  first.local_rank = 0;
  first.step = 10;
  first.steps_per_second = 2.5;
  first.metrics["loss"] = 0.5;
  ASSERT_TRUE(h.job().ReportProgress(h.Ref("a"), {second, first}).ok());
  v1::Job status = h.job().Status(/*include_nodes=*/true);
  ASSERT_EQ(status.members_size(), 1);
  ASSERT_EQ(status.members(0).progress_size(), 2);
  EXPECT_EQ(status.members(0).progress(0).local_rank(), 0);
  EXPECT_EQ(status.members(0).progress(0).generation(), 1);
  EXPECT_EQ(status.members(0).progress(0).metrics().at("loss"), 0.5);
  EXPECT_EQ(status.members(0).progress(1).step(), 20);
  first.step = 11;
  ASSERT_TRUE(h.job().ReportProgress(h.Ref("a"), {first}).ok());
  EXPECT_EQ(h.job().Status(true).members(0).progress_size(), 1) << "replaced, not merged";
  NodeRef stale = h.Ref("a");
  stale.incarnation += 1;
  EXPECT_EQ(h.job().ReportProgress(stale, {first}).code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace ddp::rendezvous
