// The fleet (issue 28, points 1-2) with real processes: a coordinator,
// ddp-client agents and ddpctl. A node whose health check fails does not join
// and a spare takes its place; a node whose check fails between generations
// (after a restart) leaves the job and a spare takes its place; a node that fails in two jobs is
// quarantined
// (--quarantine-after 2) and refused by a third, across a coordinator
// restart, until an operator uncordons it; a policy set through the API
// (ddpctl nodes policy set) holds across a restart; a drain under way holds
// across a kill -9 of the coordinator; a cordoned node is refused with the
// operator's reason.

#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/training_fixture.h"

namespace ddp::testing {
namespace {

class FleetE2eTest : public TrainingE2eTest {
 protected:
  // Generation 1: rank 0 creates `flag` (what a node's check reads) and fails,
  // which restarts the job; every other rank waits to be stopped. Later
  // generations sleep `then_sleep_s`, then succeed.
  std::string WriteMarkAndFailScript(const std::string& flag, int then_sleep_s) {
    const std::string path = Path("mark_and_fail.py");
    std::ofstream(path) << "import os, sys, time\n"
                        << "if os.environ['TORCHELASTIC_RESTART_COUNT'] == '0':\n"
                        << "    if os.environ['RANK'] == '0':\n"
                        << "        open('" << flag << "', 'w').close()\n"
                        << "        sys.exit(1)\n"
                        << "    time.sleep(60)\n"
                        << "time.sleep(" << then_sleep_s << ")\n"
                        << "sys.exit(0)\n";
    return path;
  }

  // A worker that exits with `code` at once (no torch: the fleet is the test).
  std::string WriteScript(const std::string& name, int code) {
    const std::string path = Path(name);
    std::ofstream(path) << "import sys\nsys.exit(" << code << ")\n";
    return path;
  }

  AgentProcess& Agent(const std::string& node, const std::string& job, int nodes,
                      const std::string& script, std::vector<std::string> checks = {},
                      int max_restarts = 0) {
    AgentArgsOptions options = AgentOptions(node);
    options.job = job;
    options.nnodes = absl::StrCat(nodes);
    options.nproc_per_node = 1;
    options.max_restarts = max_restarts;
    options.connect_timeout_s = 30;
    for (const std::string& check : checks) {
      options.flags.push_back("--health-check");
      options.flags.push_back(check);
    }
    options.entrypoint = {script};
    return Launch(absl::StrCat(node, "-", job), AgentArgs(options));
  }

  ShellResult Ddpctl(const std::string& args) const {
    return RunShell(absl::StrCat(Runfile("tools/ddpctl/ddpctl"), " --coordinator ",
                                 coordinator_->address(), " ", args));
  }
};

TEST_F(FleetE2eTest, FailingHealthCheck_NodeRefusedSpareTakesItsPlace_CheckShownWithNode) {
  StartCoordinator();
  const std::string ok = WriteScript("ok.py", 0);
  // The bad node comes first: without its check it would take a place.
  AgentProcess& bad =
      Agent("node-bad", "job-a", 2, ok, {"name=ecc,timeout=10s,cmd=echo 'ECC errors: 12'; exit 1"});
  ASSERT_NE(bad.Wait(kBound), 0) << bad.log();
  EXPECT_TRUE(absl::StrContains(bad.log(), "health check 'ecc' failed: ECC errors: 12"))
      << bad.log();
  AgentProcess& a = Agent("node-a", "job-a", 2, ok, {"builtin=disk,min-free=1M", "true"});
  AgentProcess& spare = Agent("node-c", "job-a", 2, ok);
  EXPECT_EQ(a.Wait(kBound), 0) << a.log();
  EXPECT_EQ(spare.Wait(kBound), 0) << spare.log();

  const ShellResult get = Ddpctl("nodes get node-bad");
  ASSERT_EQ(get.exit_code, 0) << get.output;
  EXPECT_TRUE(absl::StrContains(get.output, "ecc: FAILED")) << get.output;
  EXPECT_TRUE(absl::StrContains(get.output, "ECC errors: 12")) << get.output;
  EXPECT_TRUE(absl::StrContains(get.output, "check failed job job-a")) << get.output;
  const ShellResult good = Ddpctl("nodes get node-a");
  EXPECT_TRUE(absl::StrContains(good.output, "disk: passed")) << good.output;
  EXPECT_TRUE(absl::StrContains(good.output, "check-2: passed")) << good.output;
  const ShellResult list = Ddpctl("nodes list");
  EXPECT_TRUE(absl::StrContains(list.output, "node-bad")) << list.output;
  EXPECT_TRUE(absl::StrContains(list.output, "ecc")) << list.output;
}

TEST_F(FleetE2eTest, CheckFailsBetweenGenerations_NodeLeavesSpareTakesItsPlace_InLedger) {
  StartCoordinator();
  // Generation 1: rank 0 marks node-a bad and fails; generation 2 succeeds.
  const std::string flag = Path("node-a-is-bad");
  const std::string script = WriteMarkAndFailScript(flag, 0);
  const std::string check = absl::StrCat("name=probe,timeout=10s,cmd=if [ -e ", flag,
                                         " ]; then echo 'GPU 3 fell off the bus'; exit 1; fi");
  AgentProcess& a = Agent("node-a", "job-g", 2, script, {check}, /*max_restarts=*/1);
  AgentProcess& b = Agent("node-b", "job-g", 2, script, {}, /*max_restarts=*/1);
  // node-a and node-b run generation 1; the spare comes once it is under way
  // (it waits as a spare, or joins the restart's rendezvous).
  ASSERT_TRUE(PollUntil([&] { return access(flag.c_str(), F_OK) == 0; }, kBound)) << Logs();
  AgentProcess& spare = Agent("node-c", "job-g", 2, script, {}, /*max_restarts=*/1);

  EXPECT_EQ(a.Wait(kBound), 1) << a.log();
  EXPECT_TRUE(absl::StrContains(
      a.log(), "leaves job job-g: its health check 'probe' failed after generation 1: GPU 3"))
      << a.log();
  // The job went on without node-a: node-b and the spare ran generation 2.
  EXPECT_EQ(b.Wait(kBound), 0) << b.log();
  EXPECT_EQ(spare.Wait(kBound), 0) << spare.log();

  const ShellResult get = Ddpctl("nodes get node-a");
  ASSERT_EQ(get.exit_code, 0) << get.output;
  EXPECT_TRUE(absl::StrContains(get.output, "probe: FAILED")) << get.output;
  EXPECT_TRUE(absl::StrContains(get.output, "GPU 3 fell off the bus")) << get.output;
  EXPECT_TRUE(absl::StrContains(get.output, "check failed job job-g generation 1")) << get.output;
}

TEST_F(FleetE2eTest, SlowCheckBetweenGenerations_RestartWaitsOnlyTheShutdownTimeout) {
  // The restart waits for node-a's checks as for a node slow to stop: at most
  // shutdown_timeout (3 s); its 8 s check makes it late, so generation 2
  // forms with node-b and the spare, and node-a comes back as a spare.
  rdzv_conf_ = "heartbeat_timeout=2,last_call_timeout=1,join_timeout=60,shutdown_timeout=3";
  StartCoordinator();
  const std::string flag = Path("node-a-is-slow");
  const std::string script = WriteMarkAndFailScript(flag, 10);
  const std::string check =
      absl::StrCat("name=slow,timeout=30s,cmd=if [ -e ", flag, " ]; then sleep 8; fi");
  AgentProcess& a = Agent("node-a", "job-s", 2, script, {check}, /*max_restarts=*/1);
  AgentProcess& b = Agent("node-b", "job-s", 2, script, {}, /*max_restarts=*/1);
  ASSERT_TRUE(PollUntil([&] { return access(flag.c_str(), F_OK) == 0; }, kBound)) << Logs();
  AgentProcess& spare = Agent("node-c", "job-s", 2, script, {}, /*max_restarts=*/1);

  EXPECT_EQ(b.Wait(kBound), 0) << b.log();
  EXPECT_EQ(spare.Wait(kBound), 0) << spare.log();
  // Late, node-a's agent is told it was dropped and registers again: a spare
  // of generation 2, it ends with the job.
  EXPECT_EQ(a.Wait(kBound), 0) << a.log();
  EXPECT_TRUE(absl::StrContains(a.log(), "health check 'slow' after generation 1 passed"))
      << a.log();
  EXPECT_TRUE(absl::StrContains(a.log(), "the coordinator fenced incarnation")) << a.log();
  const ShellResult get = Ddpctl("nodes get node-a");
  EXPECT_TRUE(
      absl::StrContains(get.output, "declared dead: workers not confirmed stopped within 3s"))
      << get.output;
}

TEST_F(FleetE2eTest, NodeFailingInTwoJobs_QuarantinedRefusedByThird_UntilUncordoned) {
  coordinator_args_ = {"--quarantine-after", "2", "--quarantine-window", "1h"};
  StartCoordinator();
  const std::string fail = WriteScript("fail.py", 3);
  const std::string ok = WriteScript("ok.py", 0);
  for (const char* job : {"job-1", "job-2"}) {
    AgentProcess& agent = Agent("node-x", job, 1, fail);
    EXPECT_NE(agent.Wait(kBound), 0) << agent.log();
  }
  // The incidents reach the ledger once the jobs' events are durable.
  ASSERT_TRUE(PollUntil(
      [&] { return absl::StrContains(Ddpctl("nodes get node-x").output, "QUARANTINED"); }, kBound))
      << Ddpctl("nodes get node-x").output;
  const ShellResult get = Ddpctl("nodes get node-x");
  EXPECT_TRUE(absl::StrContains(get.output, "job 'job-1' rank 0 exit code 3")) << get.output;
  EXPECT_TRUE(absl::StrContains(get.output, "job 'job-2' rank 0 exit code 3")) << get.output;

  AgentProcess& third = Agent("node-x", "job-3", 1, ok);
  ASSERT_NE(third.Wait(kBound), 0) << third.log();
  EXPECT_TRUE(absl::StrContains(third.log(), "is quarantined and joins no job")) << third.log();
  EXPECT_TRUE(absl::StrContains(third.log(), "ddpctl nodes uncordon node-x")) << third.log();

  // Persisted: a restarted coordinator still refuses it.
  coordinator_->Kill9();
  ASSERT_TRUE(coordinator_->Start().ok());
  EXPECT_TRUE(absl::StrContains(Ddpctl("nodes list").output, "QUARANTINED"));
  AgentProcess& after_restart = Agent("node-x", "job-4", 1, ok);
  EXPECT_NE(after_restart.Wait(kBound), 0) << after_restart.log();

  const ShellResult uncordon = Ddpctl("nodes uncordon node-x");
  ASSERT_EQ(uncordon.exit_code, 0) << uncordon.output;
  AgentProcess& released = Agent("node-x", "job-5", 1, ok);
  EXPECT_EQ(released.Wait(kBound), 0) << released.log();
}

// The policy set through the API is stored: after a kill -9 of the
// coordinator it holds over the flags (here: never), and a node crossing it is
// quarantined.
TEST_F(FleetE2eTest, PolicySetThroughTheApi_HoldsAcrossRestart_NodeCrossingItQuarantined) {
  coordinator_args_ = {"--quarantine-after", "0"};
  StartCoordinator();
  const ShellResult flags = Ddpctl("nodes policy");
  ASSERT_EQ(flags.exit_code, 0) << flags.output;
  EXPECT_TRUE(absl::StrContains(flags.output, "never")) << flags.output;
  EXPECT_TRUE(absl::StrContains(flags.output, "--quarantine-after")) << flags.output;
  const ShellResult bad = Ddpctl("nodes policy set --after 2 --window 100ms");
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_TRUE(absl::StrContains(bad.output, "100ms is outside [1s, 720h]")) << bad.output;
  const ShellResult set = Ddpctl("nodes policy set --after 1 --window 2h");
  ASSERT_EQ(set.exit_code, 0) << set.output;
  EXPECT_TRUE(absl::StrContains(set.output, "after 1 counted incident within 2h")) << set.output;

  coordinator_->Kill9();
  ASSERT_TRUE(coordinator_->Start().ok());
  const ShellResult get = Ddpctl("nodes policy get --json");
  ASSERT_EQ(get.exit_code, 0) << get.output;
  EXPECT_TRUE(absl::StrContains(get.output, "\"after\":1")) << get.output;
  EXPECT_TRUE(absl::StrContains(get.output, "7200000")) << get.output;

  AgentProcess& agent = Agent("node-p", "job-p", 1, WriteScript("fail.py", 3));
  EXPECT_NE(agent.Wait(kBound), 0) << agent.log();
  ASSERT_TRUE(PollUntil(
      [&] { return absl::StrContains(Ddpctl("nodes get node-p").output, "QUARANTINED"); }, kBound))
      << Ddpctl("nodes get node-p").output;
}

// A drain under way survives a kill -9 of the coordinator during its grace:
// the restarted coordinator lets the drained node go at its time (not at
// once, not never), as a drain: the job goes on smaller with no restart
// counted.
TEST_F(FleetE2eTest, DrainUnderWay_CoordinatorKilledDuringGrace_NodeLeavesAtItsTimeNoRestart) {
  StartCoordinator();
  const std::string sleeper = Path("sleep.py");
  std::ofstream(sleeper) << "import time\ntime.sleep(600)\n";
  auto agent = [&](const std::string& node) -> AgentProcess& {
    AgentArgsOptions options = AgentOptions(node);
    options.job = "job-drain";
    options.nnodes = "1:2";
    options.nproc_per_node = 1;
    options.max_restarts = 0;
    options.connect_timeout_s = 30;
    options.entrypoint = {sleeper};
    return Launch(node, AgentArgs(options));
  };
  agent("node-a");
  AgentProcess& b = agent("node-b");
  ASSERT_TRUE(PollUntil(
      [&] {
        const std::string job = Ddpctl("--json jobs get job-drain").output;
        return absl::StrContains(job, "\"state\":\"RUNNING\"") &&
               absl::StrContains(job, "\"memberCount\":2");
      },
      kBound))
      << Ddpctl("--json jobs get job-drain").output;
  const absl::Time drained_at = absl::Now();
  const ShellResult drain = Ddpctl("nodes drain node-b --grace 8s --reason 'kernel update'");
  ASSERT_EQ(drain.exit_code, 0) << drain.output;

  coordinator_->Kill9();
  ASSERT_TRUE(coordinator_->Start().ok());
  EXPECT_NE(b.Wait(kBound), -1) << b.log();
  const absl::Duration left_after = absl::Now() - drained_at;
  EXPECT_GE(left_after, absl::Seconds(7)) << "left before its time: " << b.log();
  EXPECT_TRUE(absl::StrContains(b.log(), "kernel update")) << b.log();
  const ShellResult get = Ddpctl("--json jobs get job-drain");
  EXPECT_TRUE(absl::StrContains(get.output, "\"restartCount\":0")) << get.output;
  EXPECT_TRUE(absl::StrContains(get.output, "\"failures\":[]")) << get.output;
}

TEST_F(FleetE2eTest, CordonedNode_RefusedWithTheReason_UncordonLetsItIn) {
  StartCoordinator();
  const std::string ok = WriteScript("ok.py", 0);
  const ShellResult cordon = Ddpctl("nodes cordon node-y --reason 'fan replacement'");
  ASSERT_EQ(cordon.exit_code, 0) << cordon.output;
  EXPECT_TRUE(absl::StrContains(cordon.output, "CORDONED")) << cordon.output;
  AgentProcess& refused = Agent("node-y", "job-c", 1, ok);
  ASSERT_NE(refused.Wait(kBound), 0) << refused.log();
  EXPECT_TRUE(absl::StrContains(refused.log(), "fan replacement")) << refused.log();
  ASSERT_EQ(Ddpctl("nodes uncordon node-y").exit_code, 0);
  AgentProcess& admitted = Agent("node-y", "job-d", 1, ok);
  EXPECT_EQ(admitted.Wait(kBound), 0) << admitted.log();
  EXPECT_EQ(Ddpctl("nodes uncordon never-seen").exit_code, 1);
}

}  // namespace
}  // namespace ddp::testing
