// Drain and preemption (issue 28 point 3) and the straggler exclusion policy
// (point 4): a node leaves at the first moment every member's workers are
// ready, or at its deadline; no budget spent, no failure recorded.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/rendezvous/job.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using testing::CountEvents;
using testing::JobHarness;
using testing::MessagesOf;
using testing::Settings;
using testing::StartRunning;

// Heartbeats `nodes` every 500 ms for `total`, ticking the job.
void HeartbeatFor(JobHarness& h, const std::vector<std::string>& nodes, absl::Duration total) {
  for (absl::Duration t; t < total; t += absl::Milliseconds(500)) {
    h.clock().Advance(absl::Milliseconds(500));
    for (const std::string& n : nodes) (void)h.job().Heartbeat(h.Ref(n));
    h.job().Tick();
  }
}

RestartCause LastRestartCause(const Outbox& outbox) {
  RestartCause cause = RestartCause::RESTART_CAUSE_UNSPECIFIED;
  for (const JobEvent& e : outbox.events) {
    if (e.type() == JobEvent::RESTARTING) cause = e.restart_cause();
  }
  return cause;
}

// The generation after the drained node left: confirm the stops, wait out the
// drained node's lease, answer the master info.
void FormNextGeneration(JobHarness& h, const std::vector<std::string>& staying) {
  h.ConfirmStops();
  HeartbeatFor(h, staying, absl::Seconds(4));
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  ASSERT_EQ(h.job().state(), JobState::kRunning);
}

// A coordinator restart (kill -9) during a drain's grace: the drain is in the
// stored node record, the restored job still lets the node go at its time as
// a drain, with no restart counted and no failure recorded.
TEST(JobDrain, DrainUnderWay_SurvivesRestore_NodeLeavesAtItsTimeNoBudget) {
  JobHarness h(Settings(2, 3, /*max_restarts=*/0));
  StartRunning(h, {"a", "b", "c"});
  const absl::Time leaves_at = h.clock().Now() + absl::Seconds(2);
  ASSERT_TRUE(h.job().DrainNode("c", leaves_at, "maintenance").ok());
  InMemoryJobStateStore store;
  ASSERT_TRUE(store.Apply(h.job().TakeChanges()).ok());
  absl::StatusOr<std::vector<JobSnapshot>> snapshots = store.LoadAll();
  ASSERT_TRUE(snapshots.ok()) << snapshots.status();
  ASSERT_EQ(snapshots->size(), 1u);
  Outbox outbox;
  absl::StatusOr<std::unique_ptr<Job>> restored =
      Job::Restore((*snapshots)[0], RendezvousLimits(), h.clock(), &outbox);
  ASSERT_TRUE(restored.ok()) << restored.status();
  Job& job = **restored;
  v1::Job status = job.Status(true);
  const std::vector<v1::Member> nodes = testing::NodesById(status);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[2].leaves_at_unix_ms(), absl::ToUnixMillis(leaves_at));
  EXPECT_EQ(nodes[2].drain_reason(), "maintenance");

  auto ref = [&](const std::string& node) {
    return NodeRef{"job1", node, JobHarness::IncarnationOf(node), 1};
  };
  for (int i = 0; i < 6 && job.state() == JobState::kRunning; ++i) {
    h.clock().Advance(absl::Milliseconds(500));
    for (const char* node : {"a", "b", "c"}) (void)job.Heartbeat(ref(node));
    job.Tick();
  }
  EXPECT_GE(h.clock().Now(), leaves_at);
  auto dismissed = MessagesOf<NodeDismissed>(outbox, "c");
  ASSERT_EQ(dismissed.size(), 1u);
  EXPECT_TRUE(dismissed[0].drained);
  EXPECT_EQ(job.state(), JobState::kRestarting);
  EXPECT_EQ(LastRestartCause(outbox), RestartCause::DRAIN);
  EXPECT_EQ(job.restart_count(), 0);
  EXPECT_TRUE(job.Status(false).failures().empty());
}

TEST(JobDrain, DrainMember_EveryMemberNoticedLeavesWhenAllReady_NoBudgetNoFailure) {
  JobHarness h(Settings(2, 3, /*max_restarts=*/0));
  StartRunning(h, {"a", "b", "c"});
  const absl::Time leaves_at = h.clock().Now() + absl::Seconds(120);
  ASSERT_TRUE(h.job().DrainNode("c", leaves_at, "maintenance").ok());
  for (const char* node : {"a", "b", "c"}) {
    auto notices = MessagesOf<DrainNotice>(h.outbox(), node);
    ASSERT_EQ(notices.size(), 1u) << node;
    EXPECT_EQ(notices[0].node_id, "c");
    EXPECT_EQ(notices[0].leaves_at, leaves_at);
    EXPECT_EQ(notices[0].generation, 1);
  }
  EXPECT_EQ(CountEvents(h.outbox(), JobEvent::NODE_DRAINING), 1);
  v1::Job status = h.job().Status(true);
  const std::vector<v1::Member> nodes = testing::NodesById(status);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[2].leaves_at_unix_ms(), absl::ToUnixMillis(leaves_at));
  EXPECT_EQ(nodes[2].drain_reason(), "maintenance");

  ASSERT_TRUE(h.job().ReadyToLeave(h.Ref("a")).ok());
  ASSERT_TRUE(h.job().ReadyToLeave(h.Ref("c")).ok());
  EXPECT_EQ(h.job().state(), JobState::kRunning);  // b is not ready yet
  EXPECT_TRUE(MessagesOf<NodeDismissed>(h.outbox(), "c").empty());
  ASSERT_TRUE(h.job().ReadyToLeave(h.Ref("b")).ok());

  auto dismissed = MessagesOf<NodeDismissed>(h.outbox(), "c");
  ASSERT_EQ(dismissed.size(), 1u);
  EXPECT_TRUE(dismissed[0].drained);
  EXPECT_NE(dismissed[0].reason.find("maintenance"), std::string::npos);
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_EQ(LastRestartCause(h.outbox()), RestartCause::DRAIN);
  FormNextGeneration(h, {"a", "b"});
  EXPECT_EQ(h.LastAssignment("a")->group_world_size, 2);
  EXPECT_EQ(h.job().restart_count(), 0);
  EXPECT_TRUE(h.job().Status(false).failures().empty());
  EXPECT_FALSE(h.job().Status(false).has_root_cause());
}

TEST(JobDrain, DrainMemberNeverReady_LeavesAtItsDeadline) {
  JobHarness h(Settings(1, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().DrainNode("b", h.clock().Now() + absl::Seconds(10), "spot").ok());
  HeartbeatFor(h, {"a", "b"}, absl::Seconds(9));
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  HeartbeatFor(h, {"a", "b"}, absl::Seconds(1));
  ASSERT_EQ(MessagesOf<NodeDismissed>(h.outbox(), "b").size(), 1u);
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  FormNextGeneration(h, {"a"});
  EXPECT_EQ(h.job().restart_count(), 0);
}

TEST(JobDrain, DrainedMemberWithHotSpare_SpareTakesItsPlace) {
  JobHarness h(Settings(2, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.Register("spare").ok());
  ASSERT_TRUE(h.job().DrainNode("b", h.clock().Now(), "now").ok());  // deadline already here
  EXPECT_EQ(MessagesOf<NodeDismissed>(h.outbox(), "b").size(), 1u);
  FormNextGeneration(h, {"a", "spare"});
  EXPECT_TRUE(h.LastAssignment("spare").has_value());
  EXPECT_EQ(h.LastAssignment("a")->group_world_size, 2);
}

TEST(JobDrain, DrainSpare_LeavesAtOnceWithoutRestart) {
  JobHarness h(Settings(1, 1));
  StartRunning(h, {"a"});
  ASSERT_TRUE(h.Register("spare").ok());
  ASSERT_TRUE(h.job().DrainNode("spare", h.clock().Now() + absl::Minutes(2), "").ok());
  EXPECT_EQ(MessagesOf<NodeDismissed>(h.outbox(), "spare").size(), 1u);
  EXPECT_TRUE(MessagesOf<DrainNotice>(h.outbox(), "a").empty());
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  EXPECT_EQ(h.job().registered_nodes(), 1);
}

TEST(JobDrain, SecondDrain_KeepsTheEarlierDeadline) {
  JobHarness h(Settings(1, 2));
  StartRunning(h, {"a", "b"});
  const absl::Time first = h.clock().Now() + absl::Seconds(5);
  ASSERT_TRUE(h.job().DrainNode("b", first, "first").ok());
  ASSERT_TRUE(h.job().DrainNode("b", first + absl::Seconds(60), "later").ok());
  EXPECT_EQ(testing::NodesById(h.job().Status(true))[1].leaves_at_unix_ms(),
            absl::ToUnixMillis(first));
  EXPECT_EQ(CountEvents(h.outbox(), JobEvent::NODE_DRAINING), 1);
}

TEST(JobDrain, Errors_NotFoundInvalidFinished) {
  JobHarness h(Settings(1, 1));
  StartRunning(h, {"a"});
  const absl::Time t = h.clock().Now();
  EXPECT_EQ(h.job().DrainNode("nobody", t, "").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(h.job().DrainNode("bad id", t, "").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(h.job().Cancel("done").ok());
  EXPECT_EQ(h.job().DrainNode("a", t, "").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobDrain, Preempted_AgentsOwnNoticeDrainsIt) {
  JobHarness h(Settings(1, 2));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().Preempted(h.Ref("b"), h.clock().Now() + absl::Seconds(10), "SIGTERM").ok());
  ASSERT_EQ(MessagesOf<DrainNotice>(h.outbox(), "a").size(), 1u);
  NodeRef stale = h.Ref("b");
  stale.incarnation += 1;
  EXPECT_EQ(h.job().Preempted(stale, h.clock().Now(), "x").code(), absl::StatusCode::kAborted);
  ASSERT_TRUE(h.job().ReadyToLeave(h.Ref("a")).ok());
  ASSERT_TRUE(h.job().ReadyToLeave(h.Ref("b")).ok());
  auto dismissed = MessagesOf<NodeDismissed>(h.outbox(), "b");
  ASSERT_EQ(dismissed.size(), 1u);
  EXPECT_NE(dismissed[0].reason.find("preempted: SIGTERM"), std::string::npos);
}

TEST(JobDrain, ReadyOfAnOlderGeneration_Ignored) {
  JobHarness h(Settings(1, 2));
  StartRunning(h, {"a", "b"});
  NodeRef old = h.Ref("a");
  old.generation = 0;
  EXPECT_TRUE(h.job().ReadyToLeave(old).ok());
  ASSERT_TRUE(h.job().DrainNode("b", h.clock().Now() + absl::Seconds(30), "").ok());
  ASSERT_TRUE(h.job().ReadyToLeave(h.Ref("b")).ok());
  EXPECT_EQ(h.job().state(), JobState::kRunning);  // a never said so for generation 1
}

// ---- The straggler exclusion policy ----

JobSettings StragglerPolicy(int min_nodes, int max_nodes) {
  JobSettings s = Settings(min_nodes, max_nodes);
  s.set_straggler_exclude_factor(1.25);
  s.set_straggler_exclude_after_ms(5000);
  return s;
}

// Every node reports one rank's step time every 500 ms for `total`.
void ReportStepTimes(JobHarness& h, const std::map<std::string, double>& step_time,
                     absl::Duration total) {
  for (absl::Duration t; t < total; t += absl::Milliseconds(500)) {
    h.clock().Advance(absl::Milliseconds(500));
    for (const auto& [node, seconds] : step_time) {
      if (!h.job().Heartbeat(h.Ref(node)).ok()) continue;
      WorkerProgress p;
      p.local_rank = 0;
      p.step = 1;
      p.reported = h.clock().Now();
      p.metrics["step_time_s"] = seconds;
      (void)h.job().ReportProgress(h.Ref(node), {p});
    }
    h.job().Tick();
  }
}

TEST(JobStragglerPolicy, SlowerThanFactorForTheTime_DrainedAndExcludedWithoutBudget) {
  JobHarness h(StragglerPolicy(2, 3));
  StartRunning(h, {"a", "b", "c"});
  ReportStepTimes(h, {{"a", 1.0}, {"b", 1.0}, {"c", 1.5}}, absl::Seconds(4));
  EXPECT_EQ(h.job().state(), JobState::kRunning);  // not yet for 5 s
  ReportStepTimes(h, {{"a", 1.0}, {"b", 1.0}, {"c", 1.5}}, absl::Seconds(2));
  auto dismissed = MessagesOf<NodeDismissed>(h.outbox(), "c");
  ASSERT_EQ(dismissed.size(), 1u);
  EXPECT_TRUE(dismissed[0].drained);
  EXPECT_NE(dismissed[0].reason.find("straggler"), std::string::npos) << dismissed[0].reason;
  EXPECT_EQ(LastRestartCause(h.outbox()), RestartCause::DRAIN);
  EXPECT_EQ(h.job().restart_count(), 0);
  EXPECT_THAT(h.job().Status(false).excluded_nodes(), ::testing::ElementsAre("c"));
  EXPECT_EQ(h.Register("c", 0, -1, 2).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobStragglerPolicy, SlowOnlyForAWhile_NotExcluded) {
  JobHarness h(StragglerPolicy(2, 3));
  StartRunning(h, {"a", "b", "c"});
  ReportStepTimes(h, {{"a", 1.0}, {"b", 1.0}, {"c", 1.5}}, absl::Seconds(4));
  ReportStepTimes(h, {{"a", 1.0}, {"b", 1.0}, {"c", 1.0}}, absl::Seconds(1));
  ReportStepTimes(h, {{"a", 1.0}, {"b", 1.0}, {"c", 1.5}}, absl::Seconds(4));
  EXPECT_EQ(h.job().state(), JobState::kRunning);
  EXPECT_TRUE(MessagesOf<NodeDismissed>(h.outbox()).empty());
}

TEST(JobStragglerPolicy, EvenRunOrPolicyOff_NobodyExcluded) {
  JobHarness even(StragglerPolicy(2, 3));
  StartRunning(even, {"a", "b", "c"});
  ReportStepTimes(even, {{"a", 1.0}, {"b", 1.05}, {"c", 0.97}}, absl::Seconds(30));
  EXPECT_EQ(even.job().state(), JobState::kRunning);
  EXPECT_TRUE(MessagesOf<NodeDismissed>(even.outbox()).empty());

  JobHarness off(Settings(2, 3));
  StartRunning(off, {"a", "b", "c"});
  ReportStepTimes(off, {{"a", 1.0}, {"b", 1.0}, {"c", 3.0}}, absl::Seconds(30));
  EXPECT_EQ(off.job().state(), JobState::kRunning);
  EXPECT_TRUE(MessagesOf<NodeDismissed>(off.outbox()).empty());
}

// Scripts that report nothing: their agents' CPU busy shares are scored in
// the job's status (SPEED_SOURCE_CPU_BUSY); the exclusion policy acts on
// progress reports only, so the slow node is shown, not excluded.
TEST(JobStragglerPolicy, CpuBusyOfSilentRanks_ScoredInStatusNotExcluded) {
  JobHarness h(StragglerPolicy(2, 3));
  StartRunning(h, {"a", "b", "c"});
  const std::map<std::string, int> permille = {{"a", 200}, {"b", 205}, {"c", 300}};
  for (absl::Duration t; t < absl::Seconds(30); t += absl::Milliseconds(500)) {
    h.clock().Advance(absl::Milliseconds(500));
    for (const auto& [node, busy] : permille) {
      ASSERT_TRUE(h.job().Heartbeat(h.Ref(node)).ok());
      ASSERT_TRUE(h.job().ReportActivity(h.Ref(node), {{0, true, std::nullopt, busy}}).ok());
    }
    h.job().Tick();
  }
  EXPECT_TRUE(MessagesOf<NodeDismissed>(h.outbox()).empty());
  const v1::Job status = h.job().Status(true);
  ASSERT_EQ(status.members_size(), 3);
  for (const v1::Member& m : status.members()) {
    ASSERT_EQ(m.progress_size(), 1) << m.node_id();
    const v1::WorkerProgress& p = m.progress(0);
    EXPECT_EQ(p.speed_source(), v1::SPEED_SOURCE_CPU_BUSY) << m.node_id();
    EXPECT_EQ(p.straggler(), m.node_id() == "c") << m.node_id();
    EXPECT_DOUBLE_EQ(p.cpu_busy(), permille.at(m.node_id()) / 1000.0);
    EXPECT_EQ(p.generation(), status.generation());
    EXPECT_LE(p.age_ms(), 500);  // as of the node's last heartbeat
  }
}

}  // namespace
}  // namespace ddp::rendezvous
