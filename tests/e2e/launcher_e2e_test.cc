// ddp-client as a torchrun / torch.distributed.launch drop-in, end to end with
// real processes: the launcher forms that need no coordinator (c10d, static),
// node ids, flag conflicts and signals as torchrun handles them.

#include <glob.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/e2e/training_fixture.h"

namespace ddp::testing {
namespace {

// Two agents with one node id (the default is the hostname): the second is
// refused at once with a message naming the id and --node-id; the first
// keeps its place and the job runs once the real second node joins.
TEST_F(TrainingE2eTest, DuplicateNodeId_SecondAgentRefusedAtOnce_JobRuns) {
  StartCoordinator();
  const std::vector<std::string> launch = {"--nnodes", "2", "--max-restarts", "0"};
  AgentProcess& a = StartAgent("node-a", launch, Train(8, "0.1"));
  ASSERT_TRUE(WaitForLog("role MEMBER")) << Logs();
  AgentProcess& duplicate = StartAgent("node-a", launch, Train(8, "0.1"));
  EXPECT_NE(duplicate.Wait(absl::Seconds(30)), 0) << duplicate.log();
  const std::string refused = duplicate.log();
  EXPECT_TRUE(absl::StrContains(refused, "node id 'node-a'")) << refused;
  EXPECT_TRUE(absl::StrContains(refused, "--node-id")) << refused;
  EXPECT_LT(std::count(refused.begin(), refused.end(), '\n'), 200)
      << "the refused agent must not loop";
  AgentProcess& b = StartAgent("node-b", launch, Train(8, "0.1"));
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  ExpectTrainedTogether(4, 0);
}

// Issue 29, point 7: `--nnodes 2`, Ctrl-C while it waits, then the same job
// id with `--nnodes 1`: the abandoned job ended, so the rerun runs at once
// instead of being refused for the old node count.
TEST_F(TrainingE2eTest, AbandonedWaitingJob_RerunWithOtherNnodes_RunsAtOnce) {
  StartCoordinator();
  AgentProcess& a = StartAgent("node-a", {"--nnodes", "2"}, Train(8, "0.1"));
  ASSERT_TRUE(WaitForLog("role MEMBER")) << Logs();
  ASSERT_TRUE(a.Signal(SIGINT));
  EXPECT_NE(a.Wait(absl::Seconds(30)), 0) << a.log();
  AgentProcess& rerun = StartAgent("node-a", {"--nnodes", "1"}, Train(8, "0.1"));
  EXPECT_EQ(rerun.Wait(absl::Seconds(120)), 0) << rerun.log();
}

// A node whose flags contradict the job's is refused, and the node already
// waiting sees it at once in its log (not only at the join timeout).
TEST_F(TrainingE2eTest, ContradictingFlags_RefusedNodeExitsTwo_WaitingNodeSeesIt) {
  StartCoordinator();
  AgentProcess& a = StartAgent("node-a", {"--nnodes", "2"}, Train(8, "0.1"));
  ASSERT_TRUE(WaitForLog("role MEMBER")) << Logs();
  AgentProcess& wrong = StartAgent("node-b", {"--nnodes", "3"}, Train(8, "0.1"));
  EXPECT_EQ(wrong.Wait(absl::Seconds(30)), 2) << wrong.log();
  ASSERT_TRUE(PollUntil([&] { return absl::StrContains(a.log(), "a node was refused"); },
                        absl::Seconds(20)))
      << a.log();
  EXPECT_TRUE(absl::StrContains(a.log(), "min_nodes=3")) << a.log();
  AgentProcess& b = StartAgent("node-b2", {"--nnodes", "2"}, Train(8, "0.1"));
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
}

// torchrun's usual form, nothing started beforehand: the same command on both
// nodes with --rdzv-backend c10d --rdzv-endpoint HEAD:PORT; the agent on HEAD
// (this machine) serves the coordinator in-process and the job trains.
TEST_F(TrainingE2eTest, C10dFormNoCoordinatorStarted_HeadAgentServesIt_JobTrains) {
  const int port = FreePortPair();
  ASSERT_GT(port, 0);
  auto args = [&](const std::string& node) {
    std::vector<std::string> out = {
        "--rdzv-backend",   "c10d",      "--rdzv-endpoint", absl::StrCat("127.0.0.1:", port),
        "--rdzv-id",        kJob,        "--node-id",       node,
        "--local-addr",     "127.0.0.1", "--nnodes",        "2",
        "--nproc-per-node", "2",         "--rdzv-conf",     "last_call_timeout=1,join_timeout=60",
        "--log-dir",        Path("logs")};
    for (const std::string& arg : Train(8, "0")) out.push_back(arg);
    return out;
  };
  AgentProcess& a = Launch("node-a", args("node-a"));
  AgentProcess& b = Launch("node-b", args("node-b"));
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  // Exactly one of them served the endpoint, and said how to make it durable.
  EXPECT_EQ(CountOf(Logs(), "this agent serves one there"), 1) << Logs();
  EXPECT_TRUE(absl::StrContains(Logs(), "run a standalone `coordinator`")) << Logs();
  ExpectTrainedTogether(4, 0);
}

// torch.distributed.launch's static form on each node, nothing else started:
// ranks follow --node-rank, the workers get the user's MASTER_ADDR/PORT, and
// the agent on the master host serves the coordinator at MASTER_PORT+1.
TEST_F(TrainingE2eTest, StaticFormNoCoordinatorStarted_RanksByNodeRank_JobTrains) {
  const int port = FreePortPair();
  ASSERT_GT(port, 0);
  auto args = [&](int node_rank) {
    std::vector<std::string> out = {"--nnodes",         "2",
                                    "--node-rank",      absl::StrCat(node_rank),
                                    "--master-addr",    "127.0.0.1",
                                    "--master-port",    absl::StrCat(port),
                                    "--nproc-per-node", "2",
                                    "--local-addr",     "127.0.0.1",
                                    "--rdzv-conf",      "last_call_timeout=1,join_timeout=60",
                                    "--log-dir",        Path("logs")};
    for (const std::string& arg : Train(8, "0")) out.push_back(arg);
    return out;
  };
  // No --node-id: both "nodes" share this host's name, and in this form the node
  // rank names the node (issue 29, point 3). launch's --local_rank=N reaches the
  // script (it accepts it, as launch-era scripts do).
  // Node rank 1 first: it waits for the master's agent to serve.
  AgentProcess& b = Launch("node-1", args(1));
  AgentProcess& a = Launch("node-0", args(0));
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  EXPECT_TRUE(absl::StrContains(a.log(), absl::StrCat("ranks [0, 2) of 4, group rank 0/2, "
                                                      "master 127.0.0.1:",
                                                      port)))
      << a.log();
  EXPECT_TRUE(absl::StrContains(b.log(), "ranks [2, 4) of 4, group rank 1/2")) << b.log();
  ExpectTrainedTogether(4, 0);
}

// Issue 29, point 9: torchrun prints 4 lines of its own in the standalone
// form; ddp-client's own INFO lines (and its coordinator's) go to the run's
// log files only, so its stderr holds the workers' output alone.
TEST_F(TrainingE2eTest, Standalone_AgentQuietByDefault_EverythingInItsLogFile) {
  agent_env_ = {"DDP_LOG_LEVEL="};  // not set: the default
  const std::string script = Path("hello.py");
  std::ofstream(script) << "import os\nprint('hello from', os.environ['RANK'])\n";
  AgentProcess& a = Launch(
      "quiet", {"--standalone", "--nproc-per-node", "2", "--log-dir", Path("quiet_logs"), script});
  ASSERT_EQ(a.Wait(kBound), 0) << a.log();
  int agent_lines = 0;
  for (absl::string_view line : absl::StrSplit(a.log(), '\n', absl::SkipEmpty())) {
    // `2026-11-26T23:00:00.000000Z I client/agent/main.cc:42] ...`
    if (line.size() > 28 && line[4] == '-' && line[26] == 'Z' && line[27] == ' ') ++agent_lines;
  }
  EXPECT_EQ(agent_lines, 0) << a.log();
  EXPECT_EQ(CountOf(a.log(), "hello from"), 2) << a.log();
  glob_t found;
  ASSERT_EQ(glob(Path("quiet_logs/*/agent.log").c_str(), 0, nullptr, &found), 0);
  std::ifstream in(found.gl_pathv[0]);
  const std::string agent_log((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
  globfree(&found);
  EXPECT_TRUE(absl::StrContains(agent_log, "ddp-client exits with code 0")) << agent_log;
  EXPECT_TRUE(absl::StrContains(agent_log, "--standalone: started")) << agent_log;
}

// Two local workers run `script` (it reads SIG_DIR, writes ready<LOCAL_RANK>
// there once it waits, and <mark><LOCAL_RANK> when the forwarded signal
// reaches it); the agent gets `signal` and must exit `expected_exit`.
class SignalForwardingTest : public TrainingE2eTest {
 protected:
  void ExpectForwardedToBothWorkers(const std::string& name, int signal, const std::string& script,
                                    const std::string& mark, int expected_exit);
};

void SignalForwardingTest::ExpectForwardedToBothWorkers(const std::string& name, int signal,
                                                        const std::string& script,
                                                        const std::string& mark,
                                                        int expected_exit) {
  const std::string path = Path(name + ".py");
  std::ofstream(path) << script;
  setenv("SIG_DIR", dir_.c_str(), 1);
  AgentProcess& a = Launch(name, {"--standalone", "--nproc-per-node", "2", path});
  auto exists = [&](const std::string& file) { return access(Path(file).c_str(), F_OK) == 0; };
  ASSERT_TRUE(PollUntil([&] { return exists("ready0") && exists("ready1"); }, kBound)) << a.log();
  ASSERT_TRUE(a.Signal(signal));
  EXPECT_EQ(a.Wait(kBound), expected_exit) << a.log();
  EXPECT_TRUE(exists(mark + "0")) << a.log();
  EXPECT_TRUE(exists(mark + "1")) << a.log();
  unsetenv("SIG_DIR");
}

// Ctrl-C to the agent reaches the workers as SIGINT, so a script's
// `except KeyboardInterrupt:` (a last checkpoint) runs, as under torchrun.
TEST_F(SignalForwardingTest, Sigint_WorkersGetKeyboardInterrupt) {
  ExpectForwardedToBothWorkers("kbi", SIGINT,
                               "import os, time\n"
                               "out = os.environ['SIG_DIR']\n"
                               "open(os.path.join(out, 'ready' + os.environ['LOCAL_RANK']), "
                               "'w').close()\n"
                               "try:\n"
                               "    while True:\n"
                               "        time.sleep(0.05)\n"
                               "except KeyboardInterrupt:\n"
                               "    open(os.path.join(out, 'kbi' + os.environ['LOCAL_RANK']), "
                               "'w').close()\n",
                               "kbi", kSigintExit);
}

// A closed terminal or ssh session (SIGHUP) reaches the workers as SIGHUP, as
// torchrun forwards it, and the agent exits 128 + SIGHUP (issue 29, point 4).
TEST_F(SignalForwardingTest, Sighup_ForwardedToWorkers) {
  ExpectForwardedToBothWorkers("hup", SIGHUP,
                               "import os, signal, sys, time\n"
                               "out = os.environ['SIG_DIR']\n"
                               "def hung_up(signum, frame):\n"
                               "    open(os.path.join(out, 'hup' + os.environ['LOCAL_RANK']), "
                               "'w').close()\n"
                               "    sys.exit(0)\n"
                               "signal.signal(signal.SIGHUP, hung_up)\n"
                               "open(os.path.join(out, 'ready' + os.environ['LOCAL_RANK']), "
                               "'w').close()\n"
                               "while True:\n"
                               "    time.sleep(0.05)\n",
                               "hup", 128 + SIGHUP);
}

}  // namespace
}  // namespace ddp::testing
