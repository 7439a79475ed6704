// A stopped rank, and its peers blocked behind it (issue 23.6), with real
// processes: a coordinator, two ddp-client nodes x 2 workers (Python without
// torch, fast to restart) that touch DDP_HEARTBEAT_FILE while they "make
// progress". Ten times in a row, every rank but one stops touching (blocked in
// a collective, as it were) and half a second later the remaining one is
// stopped with SIGSTOP. The blocked peers' heartbeats are the older ones, so
// their agent reports a hang first; the restart must still name the stopped
// rank, every time: its agent reports it as a stopped process when the group
// stop begins, and the coordinator names the cause once every node's evidence
// is in.

#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/training_fixture.h"

namespace ddp::testing {
namespace {

constexpr int kRounds = 10;

class HangCulpritE2eTest : public TrainingE2eTest {
 protected:
  AgentProcess& StartNode(const std::string& node) {
    const std::string script = absl::StrCat(
        "import os, time\n"
        "d = '", dir_, "'\n"
        "r, g = os.environ['RANK'], os.environ['DDP_GENERATION']\n"
        "hb = os.environ['DDP_HEARTBEAT_FILE']\n"
        "with open(f'{d}/pid_g{g}_r{r}.tmp', 'w') as f: f.write(str(os.getpid()))\n"
        "os.replace(f'{d}/pid_g{g}_r{r}.tmp', f'{d}/pid_g{g}_r{r}')\n"
        "while not os.path.exists(f'{d}/finish'):\n"
        "    if not os.path.exists(f'{d}/block_g{g}_r{r}'):\n"
        "        with open(hb, 'a'): os.utime(hb, None)\n"
        "    time.sleep(0.05)\n");
    AgentArgsOptions options = AgentOptions(node);
    options.rdzv_conf = "last_call_timeout=1,join_timeout=60";
    options.nnodes = "2";
    options.nproc_per_node = 2;
    options.max_restarts = 20;
    options.flags = {"--worker-heartbeat-timeout", "1.5", "--monitor-interval", "0.1"};
    options.no_python = true;
    options.entrypoint = {"/usr/bin/python3", "-c", script};
    return Launch(node, AgentArgs(options));
  }

  // The pid of `rank`'s worker of generation `g`, once it wrote it.
  pid_t PidOf(int g, int rank) {
    pid_t pid = 0;
    PollUntil(
        [&] {
          return absl::SimpleAtoi(ReadWholeFile(Path(absl::StrCat("pid_g", g, "_r", rank))),
                                  &pid);
        },
        kBound);
    return pid;
  }

  // RESTARTING event messages, in order, from the job's whole history.
  std::vector<std::string> Restarts() const {
    std::vector<std::string> restarts;
    for (absl::string_view line : absl::StrSplit(JobEvents(), '\n')) {
      if (absl::StrContains(line, "RESTARTING")) restarts.emplace_back(line);
    }
    return restarts;
  }
};

TEST_F(HangCulpritE2eTest, StoppedRank_NamedAsTheCauseOfEveryRestart_TenOfTen) {
  StartCoordinator();
  AgentProcess& a = StartNode("node-a");
  AgentProcess& b = StartNode("node-b");
  std::vector<int> stopped_ranks;
  for (int round = 0; round < kRounds; ++round) {
    const int g = round + 1;
    std::vector<pid_t> pids;
    for (int rank = 0; rank < 4; ++rank) {
      pids.push_back(PidOf(g, rank));
      ASSERT_GT(pids.back(), 0) << "generation " << g << " rank " << rank << "\n" << Logs();
    }
    absl::SleepFor(absl::Milliseconds(300));  // every rank touched its heartbeat
    const int victim = (3 * round + 3) % 4;    // 3, 2, 1, 0, 3, ...: both nodes
    for (int rank = 0; rank < 4; ++rank) {
      if (rank != victim) std::ofstream(Path(absl::StrCat("block_g", g, "_r", rank)));
    }
    absl::SleepFor(absl::Milliseconds(500));
    ASSERT_EQ(kill(pids[victim], SIGSTOP), 0);
    stopped_ranks.push_back(victim);
    // The group restarts: generation g + 1 runs on both nodes.
    ASSERT_GT(PidOf(g + 1, 0), 0) << Logs();
  }
  ASSERT_EQ(mkdir(Path("finish").c_str(), 0755), 0);
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  const std::vector<std::string> restarts = Restarts();
  ASSERT_EQ(restarts.size(), static_cast<size_t>(kRounds)) << absl::StrJoin(restarts, "\n");
  for (int round = 0; round < kRounds; ++round) {
    EXPECT_TRUE(absl::StrContains(restarts[round],
                                  absl::StrCat("(rank ", stopped_ranks[round], ")")))
        << "round " << round << ": rank " << stopped_ranks[round] << " was stopped, but\n"
        << restarts[round];
    EXPECT_TRUE(absl::StrContains(restarts[round], "process was stopped")) << restarts[round];
  }
}

}  // namespace
}  // namespace ddp::testing
