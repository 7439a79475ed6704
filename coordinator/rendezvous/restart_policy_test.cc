#include "coordinator/rendezvous/restart_policy.h"

#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using Action = RestartDecision::Action;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

RestartPolicy PolicyWithBudget(int max_restarts, int restarts_spent = 0) {
  RestartPolicy::Options options;
  options.max_restarts = max_restarts;
  options.max_retained_failures = 3;
  return RestartPolicy(options, restarts_spent, std::nullopt, {});
}

FailureInfo Exit(const std::string& node_id, int global_rank, absl::Time time) {
  FailureInfo failure;
  failure.node_id = node_id;
  failure.generation = 1;
  failure.local_rank = 0;
  failure.global_rank = global_rank;
  failure.exit_code = 1;
  failure.time = time;
  return failure;
}

FailureInfo Hang(const std::string& node_id, int global_rank, absl::Time time) {
  FailureInfo failure = Exit(node_id, global_rank, time);
  failure.exit_code = 0;
  failure.hang = true;
  return failure;
}

RestartContext In(JobState state, absl::Time now = kT0) {
  RestartContext context;
  context.state = state;
  context.generation = 1;
  context.now = now;
  return context;
}

TEST(RestartPolicyTest, Decide_WorkerFailureWithBudget_ChargedRestart) {
  RestartPolicy policy = PolicyWithBudget(2);
  RestartDecision d =
      policy.Decide(Disruption::WorkerFailure(Exit("a", 0, kT0)), In(JobState::kRunning));
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.cause, RestartCause::kWorkerFailure);
  EXPECT_TRUE(d.charged);
  EXPECT_EQ(d.reason, "worker 0 (rank 0) on node 'a' failed: exit code 1; restart 1 of 2");
  ASSERT_EQ(d.recorded.size(), 1u);
  EXPECT_EQ(policy.restart_count(), 1);
  EXPECT_EQ(policy.failures().size(), 1u);
  EXPECT_FALSE(policy.root_cause().has_value());
}

TEST(RestartPolicyTest, Decide_WorkerFailureBudgetSpent_StopsThenFailsWithEarliest) {
  RestartPolicy policy = PolicyWithBudget(1, /*restarts_spent=*/1);
  const FailureInfo late = Exit("b", 1, kT0 + absl::Seconds(2));
  RestartDecision d = policy.Decide(Disruption::WorkerFailure(late), In(JobState::kRunning));
  EXPECT_EQ(d.action, Action::kStopThenFail);
  EXPECT_FALSE(d.charged);
  EXPECT_EQ(policy.restart_count(), 1);
  ASSERT_TRUE(policy.root_cause().has_value());
  EXPECT_EQ(policy.root_cause()->node_id, "b");

  // The report of the earlier failure arrives while the workers are stopped.
  const FailureInfo early = Exit("a", 0, kT0 + absl::Seconds(1));
  d = policy.Decide(Disruption::WorkerFailure(early), In(JobState::kRestarting));
  EXPECT_EQ(d.action, Action::kIgnore);
  EXPECT_EQ(d.recorded.size(), 1u);
  EXPECT_EQ(policy.root_cause()->node_id, "a");
  EXPECT_EQ(policy.failures().front().node_id, "a") << "history is by failure time";

  StopOutcome outcome = policy.ConcludeStop();
  EXPECT_FALSE(outcome.named_restart.has_value());
  ASSERT_TRUE(outcome.fail_with.has_value());
  EXPECT_EQ(outcome.fail_with->node_id, "a");
  EXPECT_EQ(outcome.fail_message,
            "worker 0 (rank 0) on node 'a' failed: exit code 1; the restart budget "
            "(max_restarts=1) is spent");
}

TEST(RestartPolicyTest, Decide_LateReportWhileRestartingWithBudget_OnlyRecorded) {
  RestartPolicy policy = PolicyWithBudget(3);
  policy.Decide(Disruption::WorkerFailure(Exit("a", 0, kT0)), In(JobState::kRunning));
  RestartDecision d = policy.Decide(Disruption::WorkerFailure(Exit("b", 1, kT0 - absl::Seconds(1))),
                                    In(JobState::kRestarting));
  EXPECT_EQ(d.action, Action::kIgnore);
  EXPECT_EQ(policy.restart_count(), 1) << "a torn-down generation's reports are not charged";
  EXPECT_FALSE(policy.root_cause().has_value()) << "not failing: no root cause";
  EXPECT_FALSE(policy.ConcludeStop().fail_with.has_value());
}

TEST(RestartPolicyTest, Decide_FailureWhilePeerLost_FreeKnockOnRestartNamingTheLostNode) {
  RestartPolicy policy = PolicyWithBudget(0);
  RestartContext context = In(JobState::kRunning, kT0 + absl::Seconds(5));
  context.lost_peer = LostPeer{"lost", kT0, /*stream_closed=*/true, absl::Seconds(5)};
  RestartDecision d =
      policy.Decide(Disruption::WorkerFailure(Exit("a", 0, kT0 + absl::Seconds(1))), context);
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.cause, RestartCause::kNodeLoss);
  EXPECT_FALSE(d.charged);
  EXPECT_EQ(policy.restart_count(), 0);
  ASSERT_EQ(d.recorded.size(), 2u);
  EXPECT_EQ(d.recorded[0].node_id, "lost") << "the loss comes first";
  EXPECT_EQ(d.recorded[0].time, kT0);
  EXPECT_EQ(d.recorded[1].message, "knock-on of losing node 'lost'");
  EXPECT_NE(d.reason.find("the restart budget is not charged"), std::string::npos) << d.reason;
}

TEST(RestartPolicyTest, Decide_AgentReplaced_FreeWhenOldSessionLostElseCharged) {
  RestartPolicy policy = PolicyWithBudget(2);
  RestartDecision d = policy.Decide(Disruption::AgentReplaced("a", 7, 8, /*old_session_lost=*/true),
                                    In(JobState::kRunning));
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.cause, RestartCause::kNodeLoss);
  EXPECT_FALSE(d.charged);
  EXPECT_TRUE(d.recorded.empty());

  d = policy.Decide(Disruption::AgentReplaced("a", 8, 9, /*old_session_lost=*/false),
                    In(JobState::kRunning));
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.cause, RestartCause::kWorkerFailure);
  EXPECT_TRUE(d.charged);
  ASSERT_EQ(d.recorded.size(), 1u);
  EXPECT_EQ(d.recorded[0].message,
            "agent of node 'a' restarted (incarnation 8 -> 9); its workers of generation 1 are "
            "gone");
  EXPECT_EQ(policy.restart_count(), 1);
}

TEST(RestartPolicyTest, Decide_MembershipChange_FreeRestartOnlyWhileRunning) {
  RestartPolicy policy = PolicyWithBudget(0);
  RestartDecision d = policy.Decide(
      Disruption::MembershipChange(RestartCause::kScale, "job resized"), In(JobState::kRunning));
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.cause, RestartCause::kScale);
  EXPECT_FALSE(d.charged);
  EXPECT_EQ(d.reason, "job resized");

  d = policy.Decide(Disruption::MembershipChange(RestartCause::kNodeLoss, "node 'a' left"),
                    In(JobState::kStarting));
  EXPECT_EQ(d.action, Action::kIgnore);
  EXPECT_EQ(policy.restart_count(), 0);
}

TEST(RestartPolicyTest, Decide_HangWithBudget_ReviewNamesTheEarliestCulpritOnce) {
  RestartPolicy policy = PolicyWithBudget(2);
  RestartDecision d = policy.Decide(Disruption::WorkerFailure(Hang("b", 1, kT0)),
                                    In(JobState::kRunning, kT0 + absl::Seconds(9)));
  EXPECT_EQ(d.action, Action::kReviewHang);
  EXPECT_TRUE(d.charged);
  EXPECT_EQ(policy.restart_count(), 1);

  FailureInfo stopped = Hang("a", 0, kT0 + absl::Seconds(3));
  stopped.process_stopped = true;  // the culprit whatever its time
  policy.Decide(Disruption::WorkerFailure(stopped), In(JobState::kRestarting));

  StopOutcome outcome = policy.ConcludeStop();
  ASSERT_TRUE(outcome.named_restart.has_value());
  EXPECT_EQ(outcome.named_restart->cause, RestartCause::kHang);
  EXPECT_EQ(outcome.named_restart->began, kT0 + absl::Seconds(9));
  EXPECT_NE(outcome.named_restart->reason.find("node 'a'"), std::string::npos)
      << outcome.named_restart->reason;
  EXPECT_FALSE(outcome.fail_with.has_value());
  EXPECT_FALSE(policy.ConcludeStop().named_restart.has_value()) << "named once";
}

TEST(RestartPolicyTest, Decide_HangWithoutBudget_StopsThenFails) {
  RestartPolicy policy = PolicyWithBudget(0);
  RestartDecision d =
      policy.Decide(Disruption::WorkerFailure(Hang("a", 0, kT0)), In(JobState::kRunning));
  EXPECT_EQ(d.action, Action::kStopThenFail);
  EXPECT_FALSE(policy.ConcludeStop().named_restart.has_value());
}

TEST(RestartPolicyTest, Record_HistoryIsBoundedKeepingTheNewest) {
  RestartPolicy policy = PolicyWithBudget(10);
  for (int i = 0; i < 5; ++i) {
    policy.Decide(Disruption::WorkerFailure(Exit("n", i, kT0 + absl::Seconds(i))),
                  In(JobState::kRestarting));
  }
  ASSERT_EQ(policy.failures().size(), 3u);
  EXPECT_EQ(policy.failures().front().global_rank, 2);
  EXPECT_EQ(policy.failures().back().global_rank, 4);
}

TEST(RestartPolicyTest, Finish_SetsTheRootCauseAndDropsTheHangReview) {
  RestartPolicy policy = PolicyWithBudget(2);
  policy.Decide(Disruption::WorkerFailure(Hang("a", 0, kT0)), In(JobState::kRunning));
  policy.Finish(std::nullopt);
  EXPECT_FALSE(policy.root_cause().has_value());
  EXPECT_FALSE(policy.ConcludeStop().named_restart.has_value());
}

}  // namespace
}  // namespace ddp::rendezvous
