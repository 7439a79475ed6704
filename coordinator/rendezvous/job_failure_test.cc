// Worker failures, the restart budget, the stop barrier and restarts racing
// with joins and reports.

#include "coordinator/rendezvous/job.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using testing::Exit;
using testing::JobHarness;
using testing::MessagesOf;
using testing::Settings;
using testing::StartRunning;

WorkerExit Crash(int local_rank, int code, const std::string& message,
                 absl::Time time = absl::UnixEpoch()) {
  return Exit(local_rank, code, 0, message, time);
}

TEST(JobFailure, WorkerFailureWithBudget_RestartsEveryNode) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/1));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), Crash(1, 3, "oom")).ok());
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_EQ(h.job().restart_count(), 1);
  EXPECT_EQ(MessagesOf<StopWorkers>(h.outbox(), "a").size(), 1u);
  EXPECT_EQ(MessagesOf<StopWorkers>(h.outbox(), "b").size(), 1u);
  EXPECT_EQ(MessagesOf<StopWorkers>(h.outbox(), "a")[0].generation, 1);
  EXPECT_EQ(testing::CountEvents(h.outbox(), JobEvent::WORKER_FAILED), 1);
  auto failures = h.job().Status(false).failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].global_rank(), 3);  // b: offset 2 + local rank 1
}

TEST(JobFailure, StopBarrier_WaitsForEveryConfirmation) {
  JobHarness h(Settings(3, 3));
  StartRunning(h, {"a", "b", "c"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Crash(0, 1, "")).ok());
  h.ClearOutbox();
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("a")).ok());
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("a")).ok());  // duplicate harmless
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("b")).ok());
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_TRUE(MessagesOf<RequestMasterInfo>(h.outbox()).empty());
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("c")).ok());
  EXPECT_EQ(h.job().state(), JobState::kStarting);
  EXPECT_EQ(h.job().generation(), 2);
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("c")->generation, 2);
  EXPECT_EQ(h.LastAssignment("c")->restart_count, 1);
}

TEST(JobFailure, StopBarrier_SilentNodeDeclaredDeadAfterShutdownTimeout) {
  JobHarness h(Settings(2, 3));
  StartRunning(h, {"a", "b", "c"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Crash(0, 1, "")).ok());
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("a")).ok());
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("b")).ok());
  // c keeps heartbeating but never confirms.
  for (int i = 0; i < 19; ++i) {
    h.clock().Advance(absl::Milliseconds(500));
    for (const char* n : {"a", "b", "c"}) (void)h.job().Heartbeat(h.Ref(n));
    h.job().Tick();
  }
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  h.clock().Advance(absl::Milliseconds(500));
  h.job().Tick();
  EXPECT_EQ(h.job().registered_nodes(), 2);
  EXPECT_EQ(h.job().Heartbeat(h.Ref("c")).status().code(), absl::StatusCode::kAborted);
  // c's workers may still run until its lease runs out, heartbeat_timeout
  // after its last heartbeat: no new generation before that.
  for (int i = 0; i < 5; ++i) {
    h.clock().Advance(absl::Milliseconds(i < 4 ? 500 : 499));
    for (const char* n : {"a", "b"}) ASSERT_TRUE(h.job().Heartbeat(h.Ref(n)).ok());
    h.job().Tick();
  }
  EXPECT_EQ(h.job().state(), JobState::kRestarting);  // 2999 ms after c's last heartbeat
  h.clock().Advance(absl::Milliseconds(1));
  h.job().Tick();
  EXPECT_EQ(h.job().state(), JobState::kStarting);
}

// kill -9 of one agent during a collective: its stream closes at once, its
// peers fail on the broken collective a moment later.
TEST(JobFailure, PeerFailsAfterMemberStreamClosed_KnockOnFreeRestartNamesLostNode) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/0));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().StreamClosed(h.Ref("a")).ok());
  h.clock().Advance(absl::Seconds(1));
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), Crash(0, 1, "gloo: connection reset")).ok());
  EXPECT_EQ(h.job().state(), JobState::kRestarting);  // not FAILED: budget untouched
  EXPECT_EQ(h.job().restart_count(), 0);
  const v1::Job status = h.job().Status(false);
  EXPECT_FALSE(status.has_root_cause());
  ASSERT_EQ(status.failures_size(), 2u);
  EXPECT_EQ(status.failures(0).node_id(), "a");  // the loss comes first
  EXPECT_NE(status.failures(0).message().find("session of node 'a' closed"), std::string::npos);
  EXPECT_EQ(status.failures(1).node_id(), "b");
  EXPECT_NE(status.failures(1).message().find("knock-on of losing node 'a'"), std::string::npos);
  // a never resumes: lost after the heartbeat timeout, the barrier ends, and
  // a replacement agent for a joins the next generation.
  for (int i = 0; i < 8; ++i) {
    h.clock().Advance(absl::Milliseconds(500));
    (void)h.job().Heartbeat(h.Ref("b"));
    h.job().Tick();
  }
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("b")).ok());
  ASSERT_TRUE(h.Register("a", 0, -1, /*version=*/2).ok());
  EXPECT_EQ(h.job().state(), JobState::kStarting);
  EXPECT_EQ(h.job().generation(), 2);
}

TEST(JobFailure, ReplacementAgentAfterStreamClosed_FreeRestart) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/0));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().StreamClosed(h.Ref("a")).ok());
  ASSERT_TRUE(h.Register("a", 0, -1, /*version=*/2).ok());
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_EQ(h.job().restart_count(), 0);
}

TEST(JobFailure, ReplacementAgentWhileOldSessionOpen_SpendsBudget) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/1));
  StartRunning(h, {"a", "b"});
  h.clock().Advance(absl::Seconds(1));  // a's agent stopped heartbeating
  ASSERT_TRUE(h.Register("a", 0, -1, /*version=*/2).ok());
  EXPECT_EQ(h.job().restart_count(), 1);
}

TEST(JobFailure, StreamResumedBeforeFailure_ChargedAsWorkerFailure) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/1));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().StreamClosed(h.Ref("a")).ok());
  ASSERT_TRUE(h.Register("a").ok());  // same incarnation: resumed
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), Crash(0, 1, "real bug")).ok());
  EXPECT_EQ(h.job().restart_count(), 1);
}

// One worker SIGSTOPped on node b; its peer on node a blocks in the
// collective after touching its heartbeat 6 ms earlier. The stopped process is
// the root cause whatever the times say.
TEST(JobFailure, HangOfStoppedProcess_RootCauseOverEarlierBlockedPeer) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/0));
  StartRunning(h, {"a", "b"});
  const absl::Time t = h.clock().Now();
  WorkerExit blocked = Exit(0, 0, 0, "hang", t, /*hang=*/true, 11);
  WorkerExit stopped = Exit(1, 0, 0, "hang; process stopped", t + absl::Milliseconds(6),
                            /*hang=*/true, 22,
                            /*process_stopped=*/true);
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), blocked).ok());
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), stopped).ok());
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("a")).ok());
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("b")).ok());
  ASSERT_EQ(h.job().state(), JobState::kFailed);
  const v1::Job status = h.job().Status(false);
  ASSERT_TRUE(status.has_root_cause());
  EXPECT_EQ(status.root_cause().node_id(), "b");
  EXPECT_EQ(status.root_cause().pid(), 22);
  EXPECT_TRUE(status.root_cause().process_stopped());
}

// Issue 23.6: with restarts left, a hang report does not name the restart's
// cause at once: the peers of a stopped rank hang behind it and their agent
// may report first. Every worker is stopped, each node's evidence comes in
// (the stopped process, reported by its agent when the stop began), and the
// RESTARTING event names the stopped rank, dated from the first report.
TEST(JobFailure, HangWithBudget_RestartNamesTheStoppedRankNotTheFirstReport) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/3));
  StartRunning(h, {"a", "b"});
  h.ClearOutbox();
  const absl::Time t = h.clock().Now();
  WorkerExit blocked = Exit(0, 0, 0, "hang", t, /*hang=*/true, 11);
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), blocked).ok());
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_EQ(h.job().restart_count(), 1);
  EXPECT_EQ(testing::CountEvents(h.outbox(), JobEvent::RESTARTING), 0);
  const std::vector<StopWorkers> stops = testing::MessagesOf<StopWorkers>(h.outbox());
  ASSERT_EQ(stops.size(), 2u);
  for (const StopWorkers& stop : stops) EXPECT_TRUE(stop.take_stacks);  // every node's stacks
  h.clock().Advance(absl::Milliseconds(300));
  WorkerExit stopped =
      Exit(1, 0, 0, "hang; process stopped when the group stop began", t - absl::Milliseconds(40),
           /*hang=*/true, 22,
           /*process_stopped=*/true);
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), stopped).ok());
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("a")).ok());
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("b")).ok());
  EXPECT_EQ(h.job().state(), JobState::kStarting);  // both back in the next round
  EXPECT_EQ(h.job().restart_count(), 1);
  ASSERT_EQ(testing::CountEvents(h.outbox(), JobEvent::RESTARTING), 1);
  for (const JobEvent& e : h.outbox().events) {
    if (e.type() != JobEvent::RESTARTING) continue;
    EXPECT_EQ(e.restart_cause(), RestartCause::HANG);
    EXPECT_NE(e.message().find("on node 'b'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("process was stopped"), std::string::npos) << e.message();
    EXPECT_EQ(e.message().find("node 'a'"), std::string::npos) << e.message();
    EXPECT_EQ(EventTime(e), t);  // when the restart began, not when it was decided
  }
  const v1::Job status = h.job().Status(false);
  ASSERT_FALSE(status.failures().empty());
  EXPECT_EQ(status.failures(0).node_id(), "b");
}

// An exit (not a hang) with budget left restarts at once, as before.
TEST(JobFailure, ExitWithBudget_RestartingEventAtOnce) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/3));
  StartRunning(h, {"a", "b"});
  h.ClearOutbox();
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Exit(0, 1, 0, "boom", h.clock().Now())).ok());
  EXPECT_EQ(testing::CountEvents(h.outbox(), JobEvent::RESTARTING), 1);
  for (const StopWorkers& stop : testing::MessagesOf<StopWorkers>(h.outbox())) {
    EXPECT_FALSE(stop.take_stacks);  // no hang: no stacks, no delay
  }
}

TEST(JobFailure, TwoFailuresAtOnce_OneRestart) {
  JobHarness h(Settings(2, 2, 5));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Crash(0, 1, "first")).ok());
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), Crash(0, 1, "second")).ok());
  EXPECT_EQ(h.job().restart_count(), 1);
  EXPECT_EQ(h.job().Status(false).failures_size(), 2u);  // both in history
  h.ConfirmStops();
  // A late report of generation 1 while the rendezvous is open: history only.
  EXPECT_EQ(h.job().state(), JobState::kStarting);
  EXPECT_EQ(h.job().restart_count(), 1);
}

TEST(JobFailure, LateFailureDuringRendezvous_NoSecondRestart) {
  JobHarness h(Settings(2, 3, 5));
  StartRunning(h, {"a", "b", "c"});
  ASSERT_TRUE(h.job().Leave(h.Ref("c")).ok());
  h.ClearOutbox();
  ASSERT_TRUE(h.job().WorkersStopped(h.Ref("a")).ok());
  ASSERT_TRUE(h.job().Leave(h.Ref("b")).ok());  // below min: rendezvous waits
  ASSERT_EQ(h.job().state(), JobState::kWaiting);
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Crash(1, 9, "late")).ok());
  EXPECT_EQ(h.job().state(), JobState::kWaiting);
  EXPECT_EQ(h.job().restart_count(), 0);
}

TEST(JobFailure, FailureWhileStarting_FailedPrecondition) {
  JobHarness h(Settings(2, 2));
  ASSERT_TRUE(h.Register("a").ok());
  ASSERT_TRUE(h.Register("b").ok());
  ASSERT_EQ(h.job().state(), JobState::kStarting);
  EXPECT_EQ(h.job().WorkerExited(h.Ref("b"), Crash(0, 1, "")).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(JobFailure, BudgetSpent_FailsWithFirstFailureOfFinalGeneration) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/1));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Crash(0, 1, "gen1")).ok());
  h.ConfirmStops();
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  ASSERT_EQ(h.job().generation(), 2);
  h.ClearOutbox();
  const absl::Time when = absl::FromUnixSeconds(1'800'000'000);
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), Crash(1, 139, "segfault", when)).ok());
  // Every worker is stopped before the job fails.
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_EQ(MessagesOf<StopWorkers>(h.outbox(), "a").size(), 1u);
  EXPECT_TRUE(MessagesOf<JobFinished>(h.outbox()).empty());
  EXPECT_EQ(testing::CountEvents(h.outbox(), JobEvent::RESTARTING), 0);
  h.ConfirmStops();
  EXPECT_EQ(h.job().state(), JobState::kFailed);
  EXPECT_EQ(h.job().generation(), 2);
  // A failure after the end changes nothing.
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Crash(0, 1, "after", when - absl::Seconds(1))).ok());
  auto finished = MessagesOf<JobFinished>(h.outbox(), "a");
  ASSERT_EQ(finished.size(), 1u);
  ASSERT_TRUE(finished[0].root_cause.has_value());
  const FailureInfo& cause = *finished[0].root_cause;
  EXPECT_EQ(cause.node_id(), "b");
  EXPECT_EQ(cause.local_rank(), 1);
  EXPECT_EQ(cause.global_rank(), 3);
  EXPECT_EQ(cause.exit_code(), 139);
  EXPECT_EQ(cause.message(), "segfault");
  EXPECT_EQ(FailureTime(cause), when);
  EXPECT_EQ(cause.generation(), 2);
  EXPECT_NE(finished[0].message.find("max_restarts=1"), std::string::npos);
  EXPECT_NE(finished[0].message.find("worker 1 (rank 3) on node 'b' failed: "
                                     "exit code 139"),
            std::string::npos)
      << finished[0].message;
  EXPECT_EQ(h.job().Status(false).root_cause().node_id(), "b");
}

TEST(JobFailure, NoBudget_SignalIsRootCause) {
  JobHarness h(Settings(1, 1, 0));
  StartRunning(h, {"a"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Exit(0, 0, 9, "killed", {})).ok());
  h.ConfirmStops();
  EXPECT_EQ(h.job().state(), JobState::kFailed);
  EXPECT_EQ(h.job().Status(false).root_cause().signal(), 9);
  EXPECT_NE(h.job().Status(false).message().find("signal 9 (SIGKILL)"), std::string::npos)
      << h.job().Status(false).message();
}

// The knock-on failure of a peer (broken collective) is reported before the
// failure that caused it: the root cause is still the earliest by time.
TEST(JobFailure, BudgetSpent_KnockOnReportedFirst_RootCauseIsEarliestFailure) {
  JobHarness h(Settings(2, 2, /*max_restarts=*/0));
  StartRunning(h, {"a", "b"});
  const absl::Time t0 = h.clock().Now();
  h.clock().Advance(absl::Milliseconds(300));
  ASSERT_TRUE(
      h.job()
          .WorkerExited(h.Ref("b"), Crash(0, 1, "Connection closed", t0 + absl::Milliseconds(80)))
          .ok());
  ASSERT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_EQ(h.job().Status(false).root_cause().node_id(), "b");  // so far
  // The stop barrier waits; meanwhile the real first failure arrives.
  ASSERT_TRUE(h.job().WorkersStopped(NodeRef{"job1", "b", h.Ref("b").incarnation, 1}).ok());
  ASSERT_TRUE(
      h.job()
          .WorkerExited(h.Ref("a"), Crash(1, 1, "failing on purpose", t0 + absl::Milliseconds(10)))
          .ok());
  ASSERT_TRUE(
      h.job()
          .WorkerExited(h.Ref("a"), Crash(0, 1, "Connection reset", t0 + absl::Milliseconds(60)))
          .ok());
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  EXPECT_TRUE(MessagesOf<JobFinished>(h.outbox()).empty());
  ASSERT_TRUE(h.job().WorkersStopped(NodeRef{"job1", "a", h.Ref("a").incarnation, 1}).ok());
  ASSERT_EQ(h.job().state(), JobState::kFailed);
  auto finished = MessagesOf<JobFinished>(h.outbox(), "b");
  ASSERT_EQ(finished.size(), 1u);
  ASSERT_TRUE(finished[0].root_cause.has_value());
  EXPECT_EQ(finished[0].root_cause->node_id(), "a");
  EXPECT_EQ(finished[0].root_cause->global_rank(), 1);
  EXPECT_EQ(finished[0].root_cause->message(), "failing on purpose");
  EXPECT_NE(finished[0].message.find("worker 1 (rank 1) on node 'a' failed: "
                                     "exit code 1; the restart budget "
                                     "(max_restarts=0) is spent"),
            std::string::npos)
      << finished[0].message;
  // The history is ordered by failure time, not by arrival.
  const v1::Job status = h.job().Status(false);
  const std::vector<FailureInfo> history(status.failures().begin(), status.failures().end());
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[0].global_rank(), 1);
  EXPECT_EQ(history[1].global_rank(), 0);
  EXPECT_EQ(history[2].global_rank(), 2);
  EXPECT_EQ(history[2].node_id(), "b");
}

TEST(JobFailure, BudgetSpent_EqualTimes_LowerGlobalRankIsRootCause) {
  JobHarness h(Settings(2, 2, 0));
  StartRunning(h, {"a", "b"});
  const absl::Time t = h.clock().Now();
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), Crash(1, 2, "b1", t)).ok());
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Crash(1, 2, "a1", t)).ok());
  h.ConfirmStops();
  ASSERT_EQ(h.job().state(), JobState::kFailed);
  EXPECT_EQ(h.job().Status(false).root_cause().global_rank(), 1);
}

TEST(JobFailure, BudgetSpent_HangWithOlderHeartbeat_IsRootCauseWithPid) {
  JobHarness h(Settings(2, 2, 0));
  StartRunning(h, {"a", "b"});
  const absl::Time t = h.clock().Now();
  WorkerExit blocked = Exit(0, 0, 0, "hang: no heartbeat for 3.2 s", t + absl::Milliseconds(150));
  blocked.set_hang(true);
  blocked.set_pid(500);
  WorkerExit hung = Exit(1, 0, 0, "hang: no heartbeat for 3.4 s", t);
  hung.set_hang(true);
  hung.set_pid(4242);
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("b"), blocked).ok());
  const std::vector<StopWorkers> stops = testing::MessagesOf<StopWorkers>(h.outbox());
  ASSERT_EQ(stops.size(), 2u);
  for (const StopWorkers& stop : stops) EXPECT_TRUE(stop.take_stacks);  // a hang, budget spent
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), hung).ok());
  h.ConfirmStops();
  ASSERT_EQ(h.job().state(), JobState::kFailed);
  const FailureInfo cause = h.job().Status(false).root_cause();
  EXPECT_EQ(cause.node_id(), "a");
  EXPECT_TRUE(cause.hang());
  EXPECT_EQ(cause.pid(), 4242);
  EXPECT_EQ(FailureTime(cause), t);
  EXPECT_NE(h.job().Status(false).message().find("hang (no heartbeat)"), std::string::npos);
}

TEST(JobFailure, RepeatedReport_CountsOnce) {
  JobHarness h(Settings(2, 2, 5));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Crash(0, 1, "x")).ok());
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Crash(0, 1, "x")).ok());
  EXPECT_EQ(h.job().Status(false).failures_size(), 1u);
  EXPECT_EQ(h.job().restart_count(), 1);
}

TEST(JobFailure, BudgetSpent_NodeSilentDuringStop_FailsAfterShutdownTimeout) {
  JobHarness h(Settings(2, 2, 0));
  StartRunning(h, {"a", "b"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Crash(0, 1, "x")).ok());
  ASSERT_TRUE(h.job().WorkersStopped(NodeRef{"job1", "a", h.Ref("a").incarnation, 1}).ok());
  for (int i = 0; i < 19; ++i) {
    h.clock().Advance(absl::Milliseconds(500));
    for (const char* n : {"a", "b"}) (void)h.job().Heartbeat(h.Ref(n));
    h.job().Tick();
  }
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  h.Advance(absl::Milliseconds(500));
  EXPECT_EQ(h.job().state(), JobState::kFailed);
  EXPECT_EQ(h.job().Status(false).root_cause().node_id(), "a");
}

TEST(JobFailure, BudgetSpent_RestoredDuringStop_StillFails) {
  JobHarness h(Settings(2, 2, 0));
  StartRunning(h, {"a", "b"});
  const absl::Time t = h.clock().Now();
  ASSERT_TRUE(
      h.job().WorkerExited(h.Ref("b"), Crash(0, 1, "knock-on", t + absl::Milliseconds(50))).ok());
  InMemoryJobStateStore store;
  ASSERT_TRUE(store.Apply(h.job().TakeChanges()).ok());
  absl::StatusOr<std::vector<JobSnapshot>> snapshots = store.LoadAll();
  ASSERT_TRUE(snapshots.ok());
  ASSERT_EQ(snapshots->size(), 1u);
  Outbox outbox;
  absl::StatusOr<std::unique_ptr<Job>> restored =
      Job::Restore((*snapshots)[0], RendezvousLimits(), h.clock(), &outbox);
  ASSERT_TRUE(restored.ok()) << restored.status();
  Job& job = **restored;
  ASSERT_EQ(job.state(), JobState::kRestarting);
  auto ref = [&](const std::string& node) {
    return NodeRef{"job1", node, JobHarness::IncarnationOf(node), 1};
  };
  ASSERT_TRUE(job.WorkerExited(ref("a"), Crash(1, 1, "first", t)).ok());
  ASSERT_TRUE(job.WorkersStopped(ref("a")).ok());
  ASSERT_TRUE(job.WorkersStopped(ref("b")).ok());
  ASSERT_EQ(job.state(), JobState::kFailed);  // not a restart: no budget
  EXPECT_EQ(job.Status(false).root_cause().message(), "first");
}

TEST(JobFailure, JoinDuringRestart_IncludedInNextGeneration) {
  JobHarness h(Settings(2, 3));
  StartRunning(h, {"a", "b", "c"});
  ASSERT_TRUE(h.job().Leave(h.Ref("c")).ok());
  ASSERT_EQ(h.job().state(), JobState::kRestarting);
  auto r = h.Register("d");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->role, NodeRole::kWaiting);
  EXPECT_EQ(h.job().state(), JobState::kRestarting);
  h.ConfirmStops();
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  EXPECT_EQ(h.LastAssignment("d")->group_rank, 2);
  EXPECT_EQ(h.LastAssignment("a")->group_rank, 0);
  EXPECT_EQ(h.LastAssignment("b")->group_rank, 1);
}

TEST(JobFailure, WorkersStoppedWithoutStopRequest_FailedPrecondition) {
  JobHarness h(Settings(1, 1));
  StartRunning(h, {"a"});
  EXPECT_EQ(h.job().WorkersStopped(h.Ref("a")).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobFailure, ErrorMessage_TruncatedToLimit) {
  RendezvousLimits limits;
  limits.max_message_length = 10;
  JobHarness h(Settings(1, 1, 0), limits);
  StartRunning(h, {"a"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Crash(0, 1, std::string(5000, 'e'))).ok());
  EXPECT_EQ(h.job().Status(false).root_cause().message().size(), 10u);
}

}  // namespace
}  // namespace ddp::rendezvous

namespace ddp::rendezvous {
namespace {

// A checkpoint a worker reported with its progress goes onto the event that
// ends the generation; the job's time shows the work since it as lost, apart
// from the downtime (rendezvous, detection); the next generation starts
// without one.
TEST(JobFailure, CheckpointThenFailure_WorkSinceCheckpointLostInStatusTime) {
  JobHarness h(Settings(1, 1, /*max_restarts=*/1));
  StartRunning(h, {"a"});
  auto advance = [&h](int seconds) {  // the node keeps its heartbeats
    for (int i = 0; i < seconds; ++i) {
      h.Advance(absl::Seconds(1));
      ASSERT_TRUE(h.job().Heartbeat(h.Ref("a")).ok());
    }
  };
  const absl::Time started = h.clock().Now();
  advance(20);
  WorkerProgress report;
  report.step = 400;
  report.checkpoint = h.clock().Now() - absl::Seconds(2);  // written 2 s ago
  report.checkpoint_step = 380;
  ASSERT_TRUE(h.job().ReportProgress(h.Ref("a"), {report}).ok());
  advance(7);
  const absl::Time failed = h.clock().Now();
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), Exit(0, 1, 0, "boom", failed)).ok());

  std::optional<JobEvent> restarting;
  for (const JobEvent& e : h.outbox().events) {
    if (e.type() == JobEvent::RESTARTING) restarting = e;
  }
  ASSERT_TRUE(restarting.has_value());
  EXPECT_EQ(restarting->last_checkpoint_unix_ms(), absl::ToUnixMillis(started + absl::Seconds(18)));
  EXPECT_EQ(restarting->last_checkpoint_step(), 380);

  const v1::JobTime time = h.job().Status(/*include_nodes=*/true).time();
  ASSERT_GE(time.generations_size(), 1);
  const v1::GenerationTime& first = time.generations(0);
  EXPECT_EQ(first.generation(), 1);
  EXPECT_EQ(first.training_ms(), 27'000);
  EXPECT_EQ(first.work_lost_ms(), 9'000);
  EXPECT_EQ(first.last_checkpoint_step(), 380);
  EXPECT_EQ(first.ended_by(), "worker_failure");
  EXPECT_EQ(time.work_lost_ms(), 9'000);
  EXPECT_EQ(time.training_ms(), 18'000);
  EXPECT_FALSE(h.job().Status(/*include_nodes=*/false).has_time());

  // The next generation starts without a checkpoint; a cancel loses none.
  h.ConfirmStops();
  ASSERT_EQ(h.job().state(), JobState::kStarting);
  ASSERT_TRUE(h.AnswerMasterInfo().ok());
  ASSERT_EQ(h.job().state(), JobState::kRunning);
  advance(5);
  ASSERT_TRUE(h.job().Cancel("enough").ok());
  const v1::JobTime after = h.job().Status(true).time();
  ASSERT_GE(after.generations_size(), 2);
  EXPECT_EQ(after.generations(1).last_checkpoint_unix_ms(), 0);
  EXPECT_EQ(after.generations(1).work_lost_ms(), 0);  // a cancel loses none
  EXPECT_EQ(after.generations(1).ended_by(), "cancelled");
}

}  // namespace
}  // namespace ddp::rendezvous
