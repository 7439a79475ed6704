// Every rank's stack (issue 25, point 3) with real processes: a coordinator,
// two ddp-client nodes x 2 PyTorch (gloo) workers. Rank 1 sleeps inside its
// step while ranks 0, 2 and 3 wait for it in all_reduce. `ddpctl jobs stacks`
// names rank 1 on its own, at the sleeping frame, and the others together in
// all_reduce; when the hang is then declared, the stacks are taken before the
// restart and travel with the failure.

#include <sys/stat.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/training_fixture.h"

namespace ddp::testing {
namespace {

class StacksE2eTest : public TrainingE2eTest {
 protected:
  std::string WriteScript() const {
    const std::string script = Path("stuck.py");
    std::ofstream(script) << "import os, time\n"
                             "import torch, torch.distributed as dist\n"
                             "d = '"
                          << dir_
                          << "'\n"
                             "dist.init_process_group('gloo')\n"
                             "rank = dist.get_rank()\n"
                             "hb = os.environ['DDP_HEARTBEAT_FILE']\n"
                             "def stuck_in_step(step):\n"
                             "    if rank == 1 and os.path.exists(d + '/sleep'):\n"
                             "        time.sleep(600)\n"
                             "    t = torch.ones(1)\n"
                             "    dist.all_reduce(t)\n"
                             "def train():\n"
                             "    step = 0\n"
                             "    while True:\n"
                             "        with open(hb, 'a'): os.utime(hb, None)\n"
                             "        stuck_in_step(step)\n"
                             "        step += 1\n"
                             "        if step == 5: open(f'{d}/running_r{rank}', 'w').close()\n"
                             "        time.sleep(0.05)\n"
                             "train()\n";
    return script;
  }

  // The same training, unmodified: no heartbeat file, no SDK; each step
  // computes for 0.1 s.
  std::string WriteUnmodifiedScript() const {
    const std::string script = Path("plain.py");
    std::ofstream(script) << "import os, time\n"
                             "import torch, torch.distributed as dist\n"
                             "d = '"
                          << dir_
                          << "'\n"
                             "dist.init_process_group('gloo')\n"
                             "rank = dist.get_rank()\n"
                             "x = torch.randn(64, 64)\n"
                             "def stuck_in_step(step):\n"
                             "    t0 = time.time()\n"
                             "    while time.time() - t0 < 0.1: torch.mm(x, x)\n"
                             "    if rank == 1 and os.path.exists(d + '/sleep'):\n"
                             "        time.sleep(600)\n"
                             "    t = torch.ones(1)\n"
                             "    dist.all_reduce(t)\n"
                             "step = 0\n"
                             "while True:\n"
                             "    stuck_in_step(step)\n"
                             "    step += 1\n"
                             "    if step == 5: open(f'{d}/running_r{rank}', 'w').close()\n";
    return script;
  }

  bool AllRanksRunning() const {
    for (int rank = 0; rank < 4; ++rank) {
      struct stat st;
      if (stat(Path(absl::StrCat("running_r", rank)).c_str(), &st) != 0) return false;
    }
    return true;
  }

  // Extra flags go before the script (the defaults otherwise: the hang
  // timeout among them).
  AgentProcess& StartNode(const std::string& node, const std::string& script,
                          std::vector<std::string> extra = {"--worker-heartbeat-timeout", "10"}) {
    AgentArgsOptions options = AgentOptions(node);
    options.rdzv_conf = "last_call_timeout=1,join_timeout=120";
    options.nnodes = "2";
    options.nproc_per_node = 2;
    options.max_restarts = 0;
    options.shutdown_timeout_s = 3;
    options.flags = {"--monitor-interval", "0.2"};
    options.flags.insert(options.flags.end(), extra.begin(), extra.end());
    options.entrypoint = {script};
    return Launch(node, AgentArgs(options));
  }

  std::string Ddpctl(const std::string& args) const {
    return RunShell(absl::StrCat(Runfile("tools/ddpctl/ddpctl"), " --coordinator ",
                                 coordinator_->address(), " ", args, " 2>&1"))
        .output;
  }
};

// Grouped stacks of the 2 x 2 job where rank 1 sleeps in its step: rank 1
// alone, first, at its sleeping frame (line `sleep_line` of stuck_in_step);
// ranks 0, 2 and 3 together in all_reduce (line `wait_line`).
void ExpectRankOneAloneAsleep(const std::string& stacks, int sleep_line, int wait_line) {
  const size_t alone = stacks.find("rank 1 (node node-");
  const size_t together = stacks.find("ranks 0,2,3:");
  ASSERT_NE(alone, std::string::npos) << stacks;
  ASSERT_NE(together, std::string::npos) << stacks;
  EXPECT_LT(alone, together) << stacks;
  const std::string sleeping = stacks.substr(alone, together - alone);
  EXPECT_TRUE(absl::StrContains(sleeping, absl::StrCat("line ", sleep_line, " in stuck_in_step")))
      << stacks;
  EXPECT_FALSE(absl::StrContains(sleeping, "all_reduce")) << stacks;
  const std::string waiting = stacks.substr(together);
  EXPECT_TRUE(absl::StrContains(waiting, "in all_reduce")) << stacks;
  EXPECT_TRUE(absl::StrContains(waiting, absl::StrCat("line ", wait_line, " in stuck_in_step")))
      << stacks;
}

TEST_F(StacksE2eTest, OneRankSleeps_NamedAloneAtItsFrame_OthersInAllReduce) {
  StartCoordinator();
  const std::string script = WriteScript();
  StartNode("node-a", script);
  StartNode("node-b", script);
  ASSERT_TRUE(PollUntil([&] { return AllRanksRunning(); }, kBound)) << Logs();
  std::ofstream(Path("sleep")) << "";
  absl::SleepFor(absl::Seconds(2));  // every rank reaches its waiting place

  const std::string stacks = Ddpctl("jobs stacks train --wait 10s");
  std::cout << "ddpctl jobs stacks:\n" << stacks;  // for the test log
  ExpectRankOneAloneAsleep(stacks, /*sleep_line=*/9, /*wait_line=*/11);
  EXPECT_FALSE(absl::StrContains(stacks, "no answer")) << stacks;

  // The job went on: the dump stopped nobody.
  const std::string json = Ddpctl("--json jobs get train");
  EXPECT_TRUE(absl::StrContains(json, "\"RUNNING\"")) << json;

  // The hang is declared (no heartbeat for 10 s): the stacks are taken
  // before the workers are stopped, and go with the failure.
  ASSERT_TRUE(WaitForLog("when rank")) << Logs();
  ASSERT_TRUE(PollUntil(
      [&] { return absl::StrContains(Ddpctl("jobs get train"), "Python stack when the hang"); },
      kBound))
      << Ddpctl("jobs get train") << Logs();
  EXPECT_TRUE(absl::StrContains(Logs(), "in stuck_in_step")) << Logs();
}

// Issue 25, points 2 and 3: the same hang in an unmodified script (no
// heartbeat file, no SDK) is found with ddp-client's default --hang-timeout
// (the workers' CPU and I/O), and every node's stacks are taken before the
// workers are stopped: `ddpctl jobs stacks --at-hang` names rank 1 alone at
// its sleeping frame, ranks 0, 2 and 3 together in all_reduce.
TEST_F(StacksE2eTest, UnmodifiedScript_HangFoundByDefault_EveryNodesStacksAtTheHang) {
  StartCoordinator();
  const std::string script = WriteUnmodifiedScript();
  StartNode("node-a", script, {});
  StartNode("node-b", script, {});
  ASSERT_TRUE(PollUntil([&] { return AllRanksRunning(); }, kBound)) << Logs();
  const absl::Time slept = absl::Now();
  std::ofstream(Path("sleep")) << "";
  ASSERT_TRUE(PollUntil(
      [&] { return absl::StrContains(Ddpctl("--json jobs get train"), "\"FAILED\""); }, kBound))
      << Ddpctl("jobs get train") << Logs();
  std::cout << "hang found and the job stopped " << absl::FormatDuration(absl::Now() - slept)
            << " after the sleep began\n";
  const std::string job = Ddpctl("jobs get train");
  EXPECT_TRUE(absl::StrContains(job, "no CPU or I/O for")) << job;

  const std::string stacks = Ddpctl("jobs stacks train --at-hang");
  std::cout << "ddpctl jobs stacks --at-hang:\n" << stacks;
  ExpectRankOneAloneAsleep(stacks, /*sleep_line=*/11, /*wait_line=*/13);
}

}  // namespace
}  // namespace ddp::testing
