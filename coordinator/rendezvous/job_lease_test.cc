// The lease (session.proto): what a heartbeat acknowledges, resumes after an
// agent's lease ran out, silent members, and the fence that keeps a new
// generation from starting while a removed member's workers may still run.

#include <map>
#include <string>

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

// The agent of `node_id` comes back on a new stream after its lease ran out
// and it stopped its workers of `generation`.
absl::StatusOr<RegisterResult> ResumeAfterLease(JobHarness& h, const std::string& node_id,
                                                Generation generation) {
  RegisterRequest r;
  r.job_id = "job1";
  r.node_id = node_id;
  r.incarnation = JobHarness::IncarnationOf(node_id);
  r.address = node_id + ".example";
  r.generation = generation;
  r.lease_expired = true;
  return h.job().Register(r);
}

TEST(JobLease, DefaultsEndTheAgentsLeaseAndGraceBeforeTheHeartbeatTimeout) {
  const JobSettings defaults = DefaultJobSettings();
  const WorkerLease lease = LeaseFor(defaults);
  EXPECT_EQ(lease.lease, absl::Seconds(2));
  EXPECT_EQ(lease.kill_after, absl::Milliseconds(2500));
  EXPECT_LT(lease.kill_after, HeartbeatTimeout(defaults));
  JobSettings slow = DefaultJobSettings();
  slow.set_heartbeat_timeout_ms(15000);
  EXPECT_EQ(LeaseFor(slow).lease, absl::Seconds(10));
  EXPECT_LT(LeaseFor(slow).kill_after, HeartbeatTimeout(slow));
}

TEST(JobLease, HeartbeatAcknowledgesTheRunningGenerationOnlyWhileItRuns) {
  JobHarness h(Settings(2, 2));
  ASSERT_TRUE(h.Register("a").ok());
  EXPECT_EQ(*h.job().Heartbeat(h.Ref("a")), 0);  // waiting
  ASSERT_TRUE(h.Register("b").ok());
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(*h.job().Heartbeat(h.Ref("a")), 1);
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), Exit(0, 1, 0, "", h.clock().Now())).ok());
  EXPECT_EQ(*h.job().Heartbeat(h.Ref("a")), 0);  // being stopped: no checkpoint now
}

TEST(JobLease, CutOffMember_NextGenerationOnlyAfterItsLeaseAndGraceRanOut) {
  JobHarness h(Settings(1, 2));
  StartRunning(h, {"a", "b"});
  const absl::Time b_last = h.clock().Now();
  // b is cut off; a keeps heartbeating.
  while (h.job().state() == JobState::kRunning) {
    h.clock().Advance(absl::Milliseconds(100));
    ASSERT_TRUE(h.job().Heartbeat(h.Ref("a")).ok());
    h.job().Tick();
    h.ConfirmStops();
  }
  // b is lost at heartbeat_timeout, after its agent stopped its workers
  // (SIGKILL at kill_after from the SEND time of its last acknowledged
  // heartbeat, which is before its receipt).
  EXPECT_GE(h.clock().Now() - b_last, absl::Seconds(3));
  EXPECT_LT(LeaseFor(h.job().settings()).kill_after, h.clock().Now() - b_last);
  EXPECT_EQ(h.job().state(), JobState::kStarting);
  EXPECT_EQ(h.job().restart_count(), 0);  // a membership change
}

// The fleet's ledger counts lost nodes by this kind, never by the message.
TEST(JobLease, SilentMemberLost_NodeLostEventCarriesLeaseExpired_LeftMemberNone) {
  JobHarness h(Settings(1, 3));
  StartRunning(h, {"a", "b", "c"});
  h.ClearOutbox();
  ASSERT_TRUE(h.job().Leave(h.Ref("c")).ok());
  while (h.job().registered_nodes() > 1) {  // b goes silent; a heartbeats
    h.clock().Advance(absl::Milliseconds(100));
    ASSERT_TRUE(h.job().Heartbeat(h.Ref("a")).ok());
    h.job().Tick();
    h.ConfirmStops();
  }
  std::map<std::string, FailureInfo::NodeLoss> loss;
  for (const JobEvent& e : h.outbox().events) {
    if (e.type() != JobEvent::NODE_LOST) continue;
    loss[e.node_id()] =
        e.has_failure() ? e.failure().node_loss() : FailureInfo::NODE_LOSS_UNSPECIFIED;
    if (e.has_failure()) EXPECT_EQ(e.failure().local_rank(), -1);
  }
  EXPECT_EQ(loss["b"], FailureInfo::LEASE_EXPIRED);
  EXPECT_EQ(loss["c"], FailureInfo::NODE_LOSS_UNSPECIFIED);
  EXPECT_EQ(loss.size(), 2u);
}

TEST(JobLease, SilentMemberThenPeerFails_KnockOnOfTheSilentNodeIsFree) {
  JobHarness h(Settings(1, 2, /*max_restarts=*/0));
  StartRunning(h, {"a", "b"});
  // b goes silent; its agent's lease runs out at 2 s and its workers die, so
  // a's workers fail on the broken collective.
  h.clock().Advance(absl::Milliseconds(2100));
  ASSERT_TRUE(h.job().Heartbeat(h.Ref("a")).ok());
  ASSERT_TRUE(
      h.job().WorkerExited(h.Ref("a"), Exit(0, 1, 0, "gloo: timed out", h.clock().Now())).ok());
  EXPECT_EQ(h.job().state(), JobState::kRestarting);  // not FAILED: budget untouched
  EXPECT_EQ(h.job().restart_count(), 0);
  const v1::Job status = h.job().Status(false);
  ASSERT_EQ(status.failures_size(), 2u);
  EXPECT_EQ(status.failures(0).node_id(), "b");
  EXPECT_NE(status.failures(0).message().find("went silent"), std::string::npos)
      << status.failures(0).message();
}

TEST(JobLease, PeerFailsWhileEveryMemberHeartbeats_ChargesTheBudget) {
  JobHarness h(Settings(1, 2, /*max_restarts=*/1));
  StartRunning(h, {"a", "b"});
  h.clock().Advance(absl::Milliseconds(500));  // one interval: not silent
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Exit(0, 1, 0, "", h.clock().Now())).ok());
  EXPECT_EQ(h.job().restart_count(), 1);
}

TEST(JobLease, ResumeAfterLeaseRanOut_FreeRestartWithTheNodeKept) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/0));
  StartRunning(h, {"a", "b"});
  h.clock().Advance(absl::Milliseconds(2800));  // cut off, back before 3 s
  ASSERT_TRUE(h.job().Heartbeat(h.Ref("a")).ok());
  absl::StatusOr<RegisterResult> resumed = ResumeAfterLease(h, "b", 1);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_TRUE(resumed->resumed);
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_EQ(h.job().restart_count(), 0);
  ASSERT_FALSE(h.outbox().events.empty());
  bool saw = false;
  for (const JobEvent& e : h.outbox().events) {
    if (e.type() != JobEvent::RESTARTING) continue;
    saw = true;
    EXPECT_EQ(e.restart_cause(), RestartCause::NODE_LOSS);
    EXPECT_NE(e.message().find("lease"), std::string::npos) << e.message();
  }
  EXPECT_TRUE(saw);
  h.ConfirmStops();
  EXPECT_EQ(h.job().state(), JobState::kStarting);  // both stopped, nobody removed
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("b")->generation, 2);
}

TEST(JobLease, ResumeAfterLeaseRanOutDuringAStop_CountsAsStopped) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Exit(0, 1, 0, "", h.clock().Now())).ok());
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("a")).ok());
  ASSERT_EQ(h.job().state(), JobState::kRestarting);
  ASSERT_TRUE(ResumeAfterLease(h, "b", 1).ok());
  EXPECT_EQ(h.job().state(), JobState::kStarting);
}

TEST(JobLease, ResumeAfterLeaseOfAnOlderGeneration_ChangesNothing) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(ResumeAfterLease(h, "b", 0).ok());
  EXPECT_EQ(h.job().state(), JobState::kRunning);
}

// The continuity promise: an agent whose lease ran out froze its workers and
// resumes; its generation still runs, so nothing restarts and nothing is
// charged or blamed.
TEST(JobLease, ResumeWithFrozenWorkers_GenerationStillRunning_NothingRestarts) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/0));
  StartRunning(h, {"a", "b"});
  h.ClearOutbox();
  h.clock().Advance(absl::Milliseconds(2800));  // both cut off, back before 3 s
  for (const std::string node : {"a", "b"}) {
    RegisterRequest r;
    r.job_id = "job1";
    r.node_id = node;
    r.incarnation = JobHarness::IncarnationOf(node);
    r.address = node + ".example";
    r.generation = 1;
    absl::StatusOr<RegisterResult> resumed = h.job().Register(r);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    EXPECT_TRUE(resumed->resumed);
    EXPECT_EQ(resumed->state, JobState::kRunning);
    EXPECT_EQ(resumed->role, NodeRole::kMember);
    EXPECT_EQ(resumed->generation, 1);
  }
  h.Advance(absl::Seconds(1));
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  EXPECT_EQ(h.job().generation(), 1);
  EXPECT_EQ(testing::CountEvents(h.outbox(), JobEvent::RESTARTING), 0);
  EXPECT_EQ(testing::CountEvents(h.outbox(), JobEvent::NODE_LOST), 0);
  EXPECT_EQ(*h.job().Heartbeat(h.Ref("a")), 1);  // thaws the workers
}

// The coordinator stalled for longer than heartbeat_timeout: when it serves
// again nobody is lost for the silence it did not hear; a node that stays
// silent is lost a full timeout later.
TEST(JobLease, ServingResumedAfterAStall_NoNodeLostForTheStall) {
  JobHarness h(Settings(1, 2));
  StartRunning(h, {"a", "b"});
  h.ClearOutbox();
  h.clock().Advance(absl::Seconds(20));  // stalled: no tick, no heartbeat
  h.job().ServingResumed(absl::Seconds(20));
  h.Advance(absl::Milliseconds(100));
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  EXPECT_EQ(h.job().registered_nodes(), 2);
  for (int i = 0; i < 40; ++i) {  // a heartbeats on; b stays silent
    ASSERT_TRUE(h.job().Heartbeat(h.Ref("a")).ok());
    h.Advance(absl::Milliseconds(100));
  }
  EXPECT_EQ(h.job().registered_nodes(), 1);
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_EQ(testing::CountEvents(h.outbox(), JobEvent::NODE_LOST), 1);
}

TEST(JobLease, ServingResumed_StopBarrierDeadlineMovesByTheStall) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Exit(0, 1, 0, "", h.clock().Now())).ok());
  ASSERT_EQ(h.job().state(), JobState::kRestarting);
  h.clock().Advance(absl::Seconds(15));  // past the 10 s shutdown timeout, stalled
  h.job().ServingResumed(absl::Seconds(15));
  h.Advance(absl::Milliseconds(100));
  EXPECT_EQ(h.job().registered_nodes(), 2);  // nobody declared dead
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("a")).ok());
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("b")).ok());
  EXPECT_EQ(h.job().state(), JobState::kStarting);
}

}  // namespace
}  // namespace ddp::rendezvous
