// End to end with real processes and real PyTorch: a //coordinator process on
// loopback, two ddp-client processes (nodes "node-a", "node-b") with two
// examples/train_ddp.py workers each over gloo, and the failures the product
// promises to survive (PRODUCT.md, Behaviour).

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/training_fixture.h"

namespace ddp::testing {
namespace {

TEST_F(TrainingE2eTest, TwoNodes_TrainToCompletion_IdenticalChecksums) {
  StartCoordinator();
  AgentProcess& a = StartAgent("node-a", {"--nnodes", "2"}, Train(8, "0"));
  AgentProcess& b = StartAgent("node-b", {"--nnodes", "2"}, Train(8, "0"));
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  ExpectTrainedTogether(4, 0);
}

TEST_F(TrainingE2eTest, WorkerExitsOne_GroupRestartsFromCheckpoint_Finishes) {
  StartCoordinator();
  const std::vector<std::string> launch = {"--nnodes", "2", "--max-restarts", "2"};
  const std::vector<std::string> train =
      Train(10, "0", {"--fail-at-step", "7", "--fail-rank", "2"});
  AgentProcess& a = StartAgent("node-a", launch, train);
  AgentProcess& b = StartAgent("node-b", launch, train);
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  const std::string logs = Logs();
  EXPECT_TRUE(absl::StrContains(logs, "rank 2 failing on purpose at step 7")) << logs;
  for (int rank = 0; rank < 4; ++rank) {
    // The checkpoint of step 5 is where generation 2 starts from.
    EXPECT_TRUE(absl::StrContains(logs, absl::StrCat("rank ", rank, " resumed from step 5")))
        << "rank " << rank << "\n"
        << logs;
  }
  ExpectTrainedTogether(4, 1);
}

TEST_F(TrainingE2eTest, AgentKilled9_SurvivorContinuesAlone_WorkersDie) {
  StartCoordinator();
  const std::vector<std::string> launch = {"--nnodes", "1:2", "--max-restarts", "3"};
  AgentProcess& a = StartAgent("node-a", launch, Train(24, "0.25"));
  AgentProcess& b = StartAgent("node-b", launch, Train(24, "0.25"));
  // Both nodes in one 4-rank generation, training under way.
  ASSERT_TRUE(BothTrainingInOneWorld(a, b)) << Logs();
  const std::set<pid_t> workers = ProcessesOf(b);
  ASSERT_GE(workers.size(), 2u) << Logs();
  ASSERT_FALSE(AnyResult()) << "training ended before the kill";
  b.Kill9();
  for (pid_t pid : workers) {
    EXPECT_TRUE(PollUntil([&] { return NoLongerRuns(pid); }, absl::Seconds(10)))
        << "worker " << pid << " of the killed agent still runs";
  }
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_TRUE(absl::StrContains(a.log(), "ranks [0, 2) of 2,")) << a.log();
  // World size 2 = 1 node x 2 workers, in a later generation.
  for (int rank = 0; rank < 2; ++rank) {
    const RankResult result = Result(rank);
    ASSERT_TRUE(result.present) << "rank " << rank << "\n" << a.log();
    EXPECT_EQ(result.world_size, 2);
    // Losing a node is a membership change (the survivor's failures are its
    // knock-on): the restart budget, and so TORCHELASTIC_RESTART_COUNT, stay 0,
    // as torchrun counts only failures.
    EXPECT_EQ(result.restart, 0);
    EXPECT_EQ(result.checksum, Result(0).checksum);
  }
  EXPECT_FALSE(Result(2).present);
  EXPECT_FALSE(Result(3).present);
}

// kill -9 of one agent during gloo all-reduces, with no restart budget: the
// survivor's workers then fail on the broken collective, but that is a
// knock-on of the lost node (its stream closed at once), not a worker failure:
// the budget is not charged, a replacement agent joins, the job finishes.
TEST_F(TrainingE2eTest, AgentKilled9_KnockOnFailuresFree_ReplacementJoinsAndFinishes) {
  StartCoordinator();
  const std::vector<std::string> launch = {"--nnodes", "2", "--max-restarts", "0"};
  AgentProcess& a = StartAgent("node-a", launch, Train(24, "0.25"));
  AgentProcess& b = StartAgent("node-b", launch, Train(24, "0.25"));
  ASSERT_TRUE(BothTrainingInOneWorld(a, b)) << Logs();
  ASSERT_FALSE(AnyResult()) << "training ended before the kill";
  b.Kill9();
  AgentProcess& replacement = StartAgent("node-b", launch, Train(24, "0.25"));
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(replacement.Wait(kBound), 0) << Logs();
  EXPECT_FALSE(absl::StrContains(a.log(), "budget (max_restarts=0) is spent")) << a.log();
  // Every rank finished in one 4-rank world; the restart count (the budget
  // spent) stayed 0.
  ExpectTrainedTogether(4, 0);
}

TEST_F(TrainingE2eTest, CoordinatorKilled9AndRestarted_NoWorkerRestart) {
  StartCoordinator();
  const int port = coordinator_->port();
  // An outage shorter than the agents' lease (2/3 of heartbeat_timeout: 4 s,
  // ample for a restart on a loaded machine) restarts no worker.
  const std::vector<std::string> launch = {"--nnodes", "2", "--rdzv-conf", "heartbeat_timeout=6"};
  AgentProcess& a = StartAgent("node-a", launch, Train(24, "0.25"));
  AgentProcess& b = StartAgent("node-b", launch, Train(24, "0.25"));
  ASSERT_TRUE(WaitForLog("step 0 loss")) << Logs();
  ASSERT_FALSE(AnyResult()) << "training ended before the kill";
  coordinator_->Kill9();
  const absl::Status restarted = coordinator_->Start();  // same dir and port
  ASSERT_TRUE(restarted.ok()) << restarted;
  EXPECT_EQ(coordinator_->port(), port);
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  EXPECT_TRUE(absl::StrContains(a.log(), "session resumed")) << a.log();
  EXPECT_TRUE(absl::StrContains(b.log(), "session resumed")) << b.log();
  ExpectEveryRankStartedOnce(4);
}

// Rank 3 is SIGKILLed; its peers die a moment later on the broken gloo
// connection ("Connection closed by peer", exit 1), and their reports race
// its own to the coordinator, which stops every worker first and names the
// earliest failure by time: rank 3, signal 9, with its real pid. (The next
// test fails a rank with an exit code; train_ddp.py leaves with os._exit so
// that its exit, like a crash, comes before its peers' knock-on exits.)
TEST_F(TrainingE2eTest, RestartBudgetSpent_AgentsExitOneNamingRootCause) {
  StartCoordinator();
  const std::vector<std::string> launch = {"--nnodes", "2", "--max-restarts", "0"};
  AgentProcess& a = StartAgent("node-a", launch, Train(400, "0.1"));
  AgentProcess& b = StartAgent("node-b", launch, Train(400, "0.1"));
  ASSERT_TRUE(WaitForLog("step 0 loss")) << Logs();
  pid_t rank3 = -1;
  for (const AgentProcess* agent : {&a, &b}) {
    for (pid_t pid : ProcessesOf(*agent)) {
      if (EnvironmentOf(pid, "RANK") == "3") rank3 = pid;
    }
  }
  ASSERT_GT(rank3, 0) << "no worker with RANK=3";
  ASSERT_EQ(kill(rank3, SIGKILL), 0);
  EXPECT_EQ(a.Wait(kBound), 1) << Logs();
  EXPECT_EQ(b.Wait(kBound), 1) << Logs();
  // The pid is known on both nodes: the killed process's, never 0.
  ExpectRootCauseSummary({&a, &b},
                         {"rank      : 3 (local_rank: 1)",
                          absl::StrCat("exitcode  : -", SIGKILL, " (pid: ", rank3, ")"),
                          "worker 1 (rank 3) on node 'node-",
                          "failed: signal 9 (SIGKILL); the restart budget", "max_restarts=0"});
  EXPECT_FALSE(AnyResult());
}

// The budget runs out on a worker that exits 3 at step 3: its peers die of the
// broken all-reduce a moment later, but the root cause is the rank that
// failed first, with its own exit code.
TEST_F(TrainingE2eTest, RestartBudgetSpent_WorkerExitsThree_RootCauseIsThatRank) {
  StartCoordinator();
  const std::vector<std::string> launch = {"--nnodes", "2", "--max-restarts", "0"};
  const std::vector<std::string> train =
      Train(40, "0", {"--fail-at-step", "3", "--fail-rank", "2", "--fail-exit-code", "3"});
  AgentProcess& a = StartAgent("node-a", launch, train);
  AgentProcess& b = StartAgent("node-b", launch, train);
  EXPECT_EQ(a.Wait(kBound), 1) << Logs();
  EXPECT_EQ(b.Wait(kBound), 1) << Logs();
  ExpectRootCauseSummary({&a, &b}, {"rank      : 2 (local_rank: 0)",
                                    "exitcode  : 3 (pid: ", "worker 0 (rank 2) on node 'node-",
                                    "failed: exit code 3; the restart budget"});
  EXPECT_FALSE(AnyResult());
  // The launcher's TORCHELASTIC_ERROR_FILE names the root cause, as torchrun's.
  for (const char* node : {"node-a", "node-b"}) {
    const std::string error = ReadWholeFile(Path(absl::StrCat(node, ".launcher_error.json")));
    EXPECT_TRUE(absl::StrContains(error, "\"message\"")) << node << ": " << error;
    EXPECT_TRUE(absl::StrContains(error, "failed: exit code 3")) << node << ": " << error;
    EXPECT_TRUE(absl::StrContains(error, "\"timestamp\"")) << node << ": " << error;
  }
}

TEST_F(TrainingE2eTest, WorkerStopsHeartbeat_HangDetected_GroupRestarts) {
  StartCoordinator();
  const std::vector<std::string> launch = {
      "--nnodes", "2", "--max-restarts", "2", "--worker-heartbeat-timeout", "3"};
  // Steps of 0.2 s, as real steps take time: the peers' touch at the start of
  // the step they then block in is a check interval (0.1 s) later than the
  // hung rank's last touch. (File mtimes alone are too coarse: the kernel
  // stamps them from a clock that ticks every few ms.)
  const std::vector<std::string> train =
      Train(8, "0.2", {"--hang-at-step", "2", "--fail-rank", "1"});
  AgentProcess& a = StartAgent("node-a", launch, train);
  AgentProcess& b = StartAgent("node-b", launch, train);
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  const std::string logs = Logs();
  EXPECT_TRUE(absl::StrContains(logs, "rank 1 hanging on purpose at step 2")) << logs;
  // Reported as a hang, never as an exit code, and blamed on the rank that
  // hung: its peers touched their heartbeat files at the start of the step
  // they then blocked in, so the hung rank's heartbeat is the oldest.
  EXPECT_TRUE(absl::StrContains(logs, "rank 1 (local_rank 1): hang: no heartbeat for ")) << logs;
  EXPECT_TRUE(absl::StrContains(logs, "(rank 1) on node 'node-")) << logs;
  // The coordinator stops every worker before it names the cause (issue 23.6).
  EXPECT_TRUE(absl::StrContains(logs, "failed: hang (no heartbeat)); stopping every worker to "
                                      "find the rank that hung first"))
      << logs;
  EXPECT_FALSE(absl::StrContains(logs, "exit code -1")) << logs;
  ExpectTrainedTogether(4, 1);
}

TEST_F(TrainingE2eTest, Sigint_WorkersStopAgentExits_NothingLeftBehind) {
  StartCoordinator();
  AgentProcess& a = StartAgent("node-a", {"--nnodes", "2"}, Train(400, "0.1"));
  AgentProcess& b = StartAgent("node-b", {"--nnodes", "2"}, Train(400, "0.1"));
  ASSERT_TRUE(WaitForLog("step 0 loss")) << Logs();
  const std::set<pid_t> started_by_a = ProcessesOf(a);
  const std::set<pid_t> started_by_b = ProcessesOf(b);
  ASSERT_GE(started_by_a.size(), 2u);
  ASSERT_GE(started_by_b.size(), 2u);
  const pid_t a_pid = a.pid();
  const pid_t b_pid = b.pid();
  ASSERT_TRUE(a.Signal(SIGINT));
  EXPECT_EQ(a.Wait(kBound), kSigintExit) << a.log();
  ExpectNothingLeft(a_pid, started_by_a, {b_pid});
  ASSERT_TRUE(b.Signal(SIGINT));
  EXPECT_EQ(b.Wait(kBound), kSigintExit) << b.log();
  ExpectNothingLeft(b_pid, started_by_b, {});
}

TEST_F(TrainingE2eTest, Standalone_TwoWorkers_TrainToCompletion) {
  AgentProcess& a = Launch("standalone", [&] {
    std::vector<std::string> args = {"--standalone", "--nproc-per-node", "2", "--log-dir",
                                     Path("logs")};
    for (const std::string& arg : Train(8, "0")) args.push_back(arg);
    return args;
  }());
  EXPECT_EQ(a.Wait(kBound), 0) << a.log();
  ExpectTrainedTogether(2, 0);
}

}  // namespace
}  // namespace ddp::testing
