// Continuity (issue 22) with real processes and real PyTorch: the coordinator
// (SQLite, one data dir) is killed with kill -9 and started again, or stopped
// and replaced by another binary (a rolling upgrade), while a 2-node x 2-worker
// gloo job trains with the job's default settings (heartbeat_timeout 3 s, so
// a 2 s lease). The agents' leases run out during the longer outages: they
// freeze their workers (SIGSTOP), resume their sessions when the coordinator
// is back, and thaw them (SIGCONT): the same worker processes finish, every
// rank started once, TORCHELASTIC_RESTART_COUNT stayed 0, and the job shows no
// failure and no restart.

#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/training_fixture.h"

namespace ddp::testing {
namespace {

class ContinuityE2eTest : public TrainingE2eTest {
 protected:
  void SetUp() override {
    TrainingE2eTest::SetUp();
    // The job's own lease settings (no heartbeat_timeout given).
    rdzv_conf_ = "last_call_timeout=1,join_timeout=60";
  }

  // `ddpctl --json jobs get JOB` against the coordinator.
  std::string JobJson() const {
    return RunShell(absl::StrCat(Runfile("tools/ddpctl/ddpctl"), " --coordinator ",
                                 coordinator_->address(), " --json jobs get ", kJob))
        .output;
  }

  // The job finished with nothing charged to anyone: no restart, no failure,
  // no node lost, in its state and in its whole history.
  void ExpectNoRestartNoFailure() const {
    const std::string events = JobEvents();
    EXPECT_TRUE(absl::StrContains(events, "JOB_CREATED")) << events;
    EXPECT_TRUE(absl::StrContains(events, "JOB_FINISHED")) << events;
    EXPECT_FALSE(absl::StrContains(events, "NODE_LOST")) << events;
    EXPECT_FALSE(absl::StrContains(events, "RESTARTING")) << events;
    EXPECT_FALSE(absl::StrContains(events, "WORKER_FAILED")) << events;
    const std::string job = JobJson();
    EXPECT_TRUE(absl::StrContains(job, "\"state\":\"SUCCEEDED\"")) << job;
    EXPECT_TRUE(absl::StrContains(job, "\"restartCount\":0,")) << job;
    EXPECT_TRUE(absl::StrContains(job, "\"failures\":[]")) << job;
    EXPECT_TRUE(absl::StrContains(job, "\"generation\":1,")) << job;
  }

  // Kills the coordinator, keeps it down for `outage`, starts it again on the
  // same data dir and port.
  void Outage(absl::Duration outage) {
    coordinator_->Kill9();
    absl::SleepFor(outage);
    const absl::Status restarted = coordinator_->Start();
    ASSERT_TRUE(restarted.ok()) << restarted;
  }
};

TEST_F(ContinuityE2eTest, CoordinatorKilled9_DownFor5ThenFor12Seconds_SameWorkersFinish) {
  StartCoordinator();
  const int port = coordinator_->port();
  AgentProcess& a = StartAgent("node-a", {"--nnodes", "2"}, Train(80, "0.25"));
  AgentProcess& b = StartAgent("node-b", {"--nnodes", "2"}, Train(80, "0.25"));
  ASSERT_TRUE(BothTrainingInOneWorld(a, b)) << Logs();
  const std::set<pid_t> workers_a = ProcessesOf(a), workers_b = ProcessesOf(b);

  ASSERT_NO_FATAL_FAILURE(Outage(absl::Seconds(5)));
  EXPECT_EQ(coordinator_->port(), port);
  // Both leases (2 s) ran out: frozen, then thawed once the sessions resumed.
  ASSERT_TRUE(PollUntil([&] { return CountOf(Logs(), "thawed the workers") >= 2; }, kBound))
      << Logs();
  ASSERT_FALSE(AnyResult()) << "training ended before the second outage";
  for (pid_t pid : workers_a) EXPECT_TRUE(ProcessesOf(a).count(pid)) << "worker " << pid;
  for (pid_t pid : workers_b) EXPECT_TRUE(ProcessesOf(b).count(pid)) << "worker " << pid;

  ASSERT_NO_FATAL_FAILURE(Outage(absl::Seconds(12)));
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  EXPECT_GE(CountOf(a.log(), "lease of generation 1 ran out"), 2) << a.log();
  EXPECT_GE(CountOf(b.log(), "thawed the workers"), 2) << b.log();
  ExpectEveryRankStartedOnce(4);
  ExpectNoRestartNoFailure();
}

// docs/operations.md, "Upgrading": stop the coordinator (SIGTERM), replace its
// binary, start the new one on the same data dir and port.
TEST_F(ContinuityE2eTest, RollingUpgrade_StopReplaceStart_NoWorkerRestart) {
  StartCoordinator();
  AgentProcess& a = StartAgent("node-a", {"--nnodes", "2"}, Train(48, "0.25"));
  AgentProcess& b = StartAgent("node-b", {"--nnodes", "2"}, Train(48, "0.25"));
  ASSERT_TRUE(BothTrainingInOneWorld(a, b)) << Logs();
  EXPECT_EQ(coordinator_->Terminate(), 0);
  // "Replace the binary": the next release is another file.
  const std::string upgraded = Path("coordinator-next");
  ASSERT_EQ(RunShell(absl::StrCat("cp ", Runfile("coordinator/coordinator"), " ", upgraded))
                .exit_code,
            0);
  coordinator_->set_binary(upgraded);
  absl::SleepFor(absl::Seconds(3));  // installing it takes a moment: past the lease
  const absl::Status started = coordinator_->Start();
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  ExpectEveryRankStartedOnce(4);
  ExpectNoRestartNoFailure();
}

// A freeze longer than the training's own collective timeout (4 s here; torch's
// default is 30 min): a thawed collective may time out. Whatever the workers
// do then, it is an ordinary failure of one generation: the group restarts
// from its checkpoint and finishes; nothing hangs.
TEST_F(ContinuityE2eTest, FreezeLongerThanTheCollectiveTimeout_JobStillFinishes) {
  StartCoordinator();
  const std::vector<std::string> launch = {"--nnodes", "2", "--max-restarts", "3"};
  AgentProcess& a = StartAgent("node-a", launch, Train(48, "0.25", {"--collective-timeout", "4"}));
  AgentProcess& b = StartAgent("node-b", launch, Train(48, "0.25", {"--collective-timeout", "4"}));
  ASSERT_TRUE(BothTrainingInOneWorld(a, b)) << Logs();
  ASSERT_NO_FATAL_FAILURE(Outage(absl::Seconds(9)));
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  const RankResult first = Result(0);
  ASSERT_TRUE(first.present) << Logs();
  ExpectTrainedTogether(4, first.restart);
}

// An agent started while its coordinator is down says so at once, keeps
// saying how long it has waited, and joins once the coordinator comes up.
TEST_F(ContinuityE2eTest, AgentStartsBeforeTheCoordinator_SaysItWaitsThenJoins) {
  StartCoordinator();
  const std::string address = coordinator_->address();
  coordinator_->Kill9();
  AgentProcess& a = Launch("node-a", AgentArgs({.coordinator = address,
                                                .job = kJob,
                                                .node_id = "node-a",
                                                .nnodes = "1",
                                                .nproc_per_node = 1,
                                                .connect_timeout_s = 40,
                                                .no_python = true,
                                                .entrypoint = {"/bin/true"}}));
  const absl::Time started = absl::Now();
  ASSERT_TRUE(WaitForLog("waiting for the coordinator at " + address)) << Logs();
  EXPECT_LT(absl::Now() - started, absl::Seconds(5));
  EXPECT_TRUE(absl::StrContains(a.log(), "giving up after 40s, --connect-timeout")) << a.log();
  ASSERT_TRUE(WaitForLog("unreachable for 1")) << Logs();  // 10+ s: said again
  ASSERT_TRUE(coordinator_->Start().ok());
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_TRUE(absl::StrContains(a.log(), "reached the coordinator at " + address)) << a.log();
}

}  // namespace
}  // namespace ddp::testing
