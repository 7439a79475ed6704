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
  failure.set_node_id(node_id);
  failure.set_generation(1);
  failure.set_local_rank(0);
  failure.set_global_rank(global_rank);
  failure.set_exit_code(1);
  SetFailureTime(time, &failure);
  return failure;
}

FailureInfo Hang(const std::string& node_id, int global_rank, absl::Time time) {
  FailureInfo failure = Exit(node_id, global_rank, time);
  failure.set_exit_code(0);
  failure.set_hang(true);
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
  EXPECT_EQ(d.cause, RestartCause::WORKER_FAILURE);
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
  EXPECT_EQ(policy.root_cause()->node_id(), "b");

  // The report of the earlier failure arrives while the workers are stopped.
  const FailureInfo early = Exit("a", 0, kT0 + absl::Seconds(1));
  d = policy.Decide(Disruption::WorkerFailure(early), In(JobState::kRestarting));
  EXPECT_EQ(d.action, Action::kIgnore);
  EXPECT_EQ(d.recorded.size(), 1u);
  EXPECT_EQ(policy.root_cause()->node_id(), "a");
  EXPECT_EQ(policy.failures().front().node_id(), "a") << "history is by failure time";

  StopOutcome outcome = policy.ConcludeStop();
  EXPECT_FALSE(outcome.named_restart.has_value());
  ASSERT_TRUE(outcome.fail_with.has_value());
  EXPECT_EQ(outcome.fail_with->node_id(), "a");
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
  EXPECT_EQ(d.cause, RestartCause::NODE_LOSS);
  EXPECT_FALSE(d.charged);
  EXPECT_EQ(policy.restart_count(), 0);
  ASSERT_EQ(d.recorded.size(), 2u);
  EXPECT_EQ(d.recorded[0].node_id(), "lost") << "the loss comes first";
  EXPECT_EQ(FailureTime(d.recorded[0]), kT0);
  EXPECT_EQ(d.recorded[1].message(), "knock-on of losing node 'lost'");
  EXPECT_NE(d.reason.find("the restart budget is not charged"), std::string::npos) << d.reason;
}

TEST(RestartPolicyTest, Decide_AgentReplaced_FreeWhenOldSessionLostElseCharged) {
  RestartPolicy policy = PolicyWithBudget(2);
  RestartDecision d = policy.Decide(Disruption::AgentReplaced("a", 7, 8, /*old_session_lost=*/true),
                                    In(JobState::kRunning));
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.cause, RestartCause::NODE_LOSS);
  EXPECT_FALSE(d.charged);
  EXPECT_TRUE(d.recorded.empty());

  d = policy.Decide(Disruption::AgentReplaced("a", 8, 9, /*old_session_lost=*/false),
                    In(JobState::kRunning));
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.cause, RestartCause::WORKER_FAILURE);
  EXPECT_TRUE(d.charged);
  ASSERT_EQ(d.recorded.size(), 1u);
  EXPECT_EQ(d.recorded[0].message(),
            "agent of node 'a' restarted (incarnation 8 -> 9); its workers of generation 1 are "
            "gone");
  EXPECT_EQ(policy.restart_count(), 1);
}

TEST(RestartPolicyTest, Decide_MembershipChange_FreeRestartOnlyWhileRunning) {
  RestartPolicy policy = PolicyWithBudget(0);
  RestartDecision d = policy.Decide(
      Disruption::MembershipChange(RestartCause::SCALE, "job resized"), In(JobState::kRunning));
  EXPECT_EQ(d.action, Action::kRestart);
  EXPECT_EQ(d.cause, RestartCause::SCALE);
  EXPECT_FALSE(d.charged);
  EXPECT_EQ(d.reason, "job resized");

  d = policy.Decide(Disruption::MembershipChange(RestartCause::NODE_LOSS, "node 'a' left"),
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
  stopped.set_process_stopped(true);  // the culprit whatever its time
  policy.Decide(Disruption::WorkerFailure(stopped), In(JobState::kRestarting));

  StopOutcome outcome = policy.ConcludeStop();
  ASSERT_TRUE(outcome.named_restart.has_value());
  EXPECT_EQ(outcome.named_restart->cause, RestartCause::HANG);
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
  EXPECT_EQ(policy.failures().front().global_rank(), 2);
  EXPECT_EQ(policy.failures().back().global_rank(), 4);
}

TEST(RestartPolicyTest, Finish_SetsTheRootCauseAndDropsTheHangReview) {
  RestartPolicy policy = PolicyWithBudget(2);
  policy.Decide(Disruption::WorkerFailure(Hang("a", 0, kT0)), In(JobState::kRunning));
  policy.Finish(std::nullopt);
  EXPECT_FALSE(policy.root_cause().has_value());
  EXPECT_FALSE(policy.ConcludeStop().named_restart.has_value());
}

// Issue 25, point 4: a generation that fails the same way within its first
// seconds, three times in a row, stops the job rather than the whole budget.
RestartContext EarlyIn(Generation generation, absl::Duration after_start) {
  RestartContext context = In(JobState::kRunning, kT0 + after_start);
  context.generation = generation;
  context.running_since = kT0;
  return context;
}

FailureInfo SameEarlyFailure(Generation generation) {
  FailureInfo failure = Exit("a", static_cast<int>(generation) % 2, kT0);
  failure.set_generation(generation);
  failure.set_exit_code(2);
  failure.set_message("ModuleNotFoundError: No module named 'apex'");
  return failure;
}

TEST(RestartPolicyTest, Decide_SameEarlyFailureThreeGenerationsInARow_StopsThenFailsEarly) {
  RestartPolicy policy = PolicyWithBudget(100);
  for (Generation g = 1; g <= 2; ++g) {
    RestartDecision d =
        policy.Decide(Disruption::WorkerFailure(SameEarlyFailure(g)), EarlyIn(g, absl::Seconds(2)));
    EXPECT_EQ(d.action, Action::kRestart) << "generation " << g;
    policy.ConcludeStop();
  }
  RestartDecision third =
      policy.Decide(Disruption::WorkerFailure(SameEarlyFailure(3)), EarlyIn(3, absl::Seconds(2)));
  EXPECT_EQ(third.action, Action::kStopThenFail);
  EXPECT_EQ(policy.restart_count(), 2);  // nothing more spent
  const StopOutcome outcome = policy.ConcludeStop();
  ASSERT_TRUE(outcome.fail_with.has_value());
  EXPECT_EQ(outcome.fail_with->message(), "ModuleNotFoundError: No module named 'apex'");
  EXPECT_NE(outcome.fail_message.find("the same failure ended each of the last 3 generations"),
            std::string::npos)
      << outcome.fail_message;
  EXPECT_NE(outcome.fail_message.find("98 restarts left"), std::string::npos)
      << outcome.fail_message;
}

TEST(RestartPolicyTest, Decide_EarlyFailuresThatDifferOrComeLate_KeepRestarting) {
  RestartPolicy policy = PolicyWithBudget(100);
  FailureInfo other = SameEarlyFailure(2);
  other.set_message("RuntimeError: CUDA error: out of memory");
  const struct {
    FailureInfo failure;
    RestartContext context;
  } reports[] = {
      {SameEarlyFailure(1), EarlyIn(1, absl::Seconds(2))},
      {other, EarlyIn(2, absl::Seconds(2))},  // differs: count restarts
      {SameEarlyFailure(3), EarlyIn(3, absl::Seconds(2))},
      {SameEarlyFailure(4), EarlyIn(4, absl::Minutes(5))},  // late: not a crash loop
      {SameEarlyFailure(5), EarlyIn(5, absl::Seconds(2))},
      {SameEarlyFailure(7), EarlyIn(7, absl::Seconds(2))},  // a generation between
      {SameEarlyFailure(8), EarlyIn(8, absl::Seconds(2))},
  };
  for (const auto& report : reports) {
    RestartDecision d = policy.Decide(Disruption::WorkerFailure(report.failure), report.context);
    EXPECT_EQ(d.action, Action::kRestart) << "generation " << report.context.generation;
    policy.ConcludeStop();
  }
}

TEST(RestartPolicyTest, Decide_StartUnknownAfterRestore_NoCrashLoopDecision) {
  RestartPolicy policy = PolicyWithBudget(100);
  for (Generation g = 1; g <= 4; ++g) {
    RestartContext context = EarlyIn(g, absl::Seconds(1));
    context.running_since = absl::Time();
    EXPECT_EQ(policy.Decide(Disruption::WorkerFailure(SameEarlyFailure(g)), context).action,
              Action::kRestart);
    policy.ConcludeStop();
  }
}

}  // namespace
}  // namespace ddp::rendezvous
