// ddp-client --prewarm end to end, with real processes and real PyTorch: the
// workers of every generation are standby interpreters that imported torch
// before they were needed, the training they run is the training a cold start
// runs (same checksum), and a hot spare that steps in starts warm too.

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/training_fixture.h"

namespace ddp::testing {
namespace {

const std::vector<std::string> kPrewarm = {"--prewarm", "torch,torch.distributed"};

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

using PrewarmE2eTest = TrainingE2eTest;

// One job cold, the same job with --prewarm: rank 2 fails at step 7 (late
// enough for the standbys of the next generation to be made), the group
// restarts from the checkpoint of step 5; both runs end with the same
// parameters, and with --prewarm every worker of both generations was a
// standby.
TEST_F(PrewarmE2eTest, WorkerFails_EveryStartWarm_SameTrainingAsCold) {
  StartCoordinator();
  const std::vector<std::string> launch = {"--nnodes", "2", "--max-restarts", "1"};
  const std::vector<std::string> train =
      Train(10, "0.6", {"--fail-at-step", "7", "--fail-rank", "2"});

  job_ = "cold";
  AgentProcess& cold_a = StartAgent("node-a", launch, train);
  AgentProcess& cold_b = StartAgent("node-b", launch, train);
  ASSERT_EQ(cold_a.Wait(kBound), 0) << Logs();
  ASSERT_EQ(cold_b.Wait(kBound), 0) << Logs();
  ExpectTrainedTogether(4, 1);
  const std::string cold_checksum = Result(0).checksum;
  ASSERT_EQ(std::system(
                absl::StrCat("rm -rf ", Path("results"), "/* ", Path("checkpoints"), "/*").c_str()),
            0);

  job_ = "warm";
  AgentProcess& warm_a = StartAgent("node-a", With(launch, kPrewarm), train);
  AgentProcess& warm_b = StartAgent("node-b", With(launch, kPrewarm), train);
  ASSERT_EQ(warm_a.Wait(kBound), 0) << Logs();
  ASSERT_EQ(warm_b.Wait(kBound), 0) << Logs();
  ExpectTrainedTogether(4, 1);
  EXPECT_EQ(Result(0).checksum, cold_checksum);
  EXPECT_TRUE(absl::StrContains(Logs(), "rank 2 failing on purpose at step 7")) << Logs();
  for (const AgentProcess* agent : {&warm_a, &warm_b}) {
    const std::string log = agent->log();
    // Two local ranks, two generations: four warm starts, no cold one.
    EXPECT_EQ(CountOf(log, "starts warm"), 4) << log;
    EXPECT_EQ(CountOf(log, "starts cold"), 0) << log;
  }
}

// Two members and a hot spare, all with --prewarm; node-b is killed -9 while
// training: none of its processes (zygote, workers, standbys) is left, the
// spare takes its place and its workers start warm.
TEST_F(PrewarmE2eTest, HotSpareStepsIn_ItsWorkersStartWarm) {
  StartCoordinator();
  const std::vector<std::string> launch = With({"--nnodes", "2", "--max-restarts", "0"}, kPrewarm);
  AgentProcess& a = StartAgent("node-a", launch, Train(30, "0.4"));
  AgentProcess& b = StartAgent("node-b", launch, Train(30, "0.4"));
  ASSERT_TRUE(BothTrainingInOneWorld(a, b)) << Logs();
  AgentProcess& spare = StartAgent("node-c", launch, Train(30, "0.4"));
  ASSERT_TRUE(PollUntil(
      [&] { return CountOf(spare.log(), "it waits for the next generation") >= 2; }, kBound))
      << spare.log();
  // node-b's zygote, its two workers and their two refills (forked at once).
  std::set<pid_t> processes;
  ASSERT_TRUE(PollUntil(
      [&] {
        processes = ProcessesOf(b);
        return processes.size() >= 5;
      },
      kBound))
      << processes.size() << " processes\n"
      << b.log();
  ASSERT_FALSE(AnyResult()) << "training ended before the kill";
  b.Kill9();
  // Nothing of the killed agent runs on: workers, standbys and the zygote
  // die with it (PR_SET_PDEATHSIG).
  for (pid_t pid : processes) {
    EXPECT_TRUE(PollUntil([&] { return NoLongerRuns(pid); }, absl::Seconds(10)))
        << "process " << pid << " of the killed agent still runs";
  }
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(spare.Wait(kBound), 0) << Logs();
  EXPECT_EQ(CountOf(spare.log(), "starts warm"), 2) << spare.log();
  EXPECT_EQ(CountOf(spare.log(), "starts cold"), 0) << spare.log();
  ExpectTrainedTogether(4, 0);
}

}  // namespace
}  // namespace ddp::testing
