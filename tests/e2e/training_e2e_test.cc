// End to end with real processes and real PyTorch: a //coordinator process on
// loopback, two ddp-client processes (nodes "node-a", "node-b") with two
// examples/train_ddp.py workers each over gloo, and the failures the product
// promises to survive (PRODUCT.md, Behaviour). Every wait polls a condition
// under a loose bound; TearDown kills and reaps everything the test started
// (the test is a child subreaper, so orphans come back to it).

#include <sys/socket.h>
#include <netinet/in.h>
#include <fstream>
#include <algorithm>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"
#include "tests/e2e/agent_process.h"
#include "tests/e2e/process_table.h"

namespace ddp::testing {
namespace {

// Loose bound of every wait: 4 PyTorch workers start in ~15 s on 2 cores.
constexpr absl::Duration kBound = absl::Seconds(120);
constexpr absl::Duration kPoll = absl::Milliseconds(50);
constexpr char kJob[] = "train";
constexpr int kSigintExit = 128 + SIGINT;

bool PollUntil(const std::function<bool()>& done, absl::Duration bound) {
  const absl::Time deadline = absl::Now() + bound;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(kPoll);
  }
  return true;
}

// A loopback port P such that P and P + 1 are free now (0 if none found).
int FreePortPair() {
  auto bind_port = [](int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    int bound = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
      socklen_t length = sizeof(address);
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
      bound = ntohs(address.sin_port);
    }
    close(fd);
    return bound;
  };
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int port = bind_port(0);
    if (port > 0 && port < 65535 && bind_port(port + 1) == port + 1) return port;
  }
  return 0;
}

int CountOf(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

// What train_ddp.py wrote to --result-dir/rank<R>.txt (a one-line JSON).
struct RankResult {
  bool present = false;
  int world_size = -1;
  int restart = -1;
  std::string checksum;
};

int JsonInt(const std::string& json, const std::string& key) {
  const std::string prefix = absl::StrCat("\"", key, "\": ");
  const size_t at = json.find(prefix);
  int value = -1;
  if (at == std::string::npos) return value;
  const size_t end = json.find_first_of(",}", at);
  absl::SimpleAtoi(json.substr(at + prefix.size(), end - at - prefix.size()), &value);
  return value;
}

class TrainingE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(MakeSubreaper()); }

  void SetUp() override {
    struct stat st;
    if (stat("/usr/lib/python3/dist-packages/torch", &st) != 0) {
      GTEST_SKIP() << "no PyTorch for /usr/bin/python3";
    }
    dir_ = absl::StrCat(getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (const std::string& d : {dir_, Path("results"), Path("checkpoints"), Path("data")}) {
      ASSERT_EQ(mkdir(d.c_str(), 0755), 0) << d;
    }
  }

  void TearDown() override {
    agents_.clear();
    coordinator_.reset();
    const int leftovers = KillAndReapDescendants(absl::Seconds(10));
    // After a failure, the agents killed above may take their workers along
    // a moment later; only a passing test must have left nothing.
    if (!HasFailure()) EXPECT_EQ(leftovers, 0) << "processes outlived their agent";
  }

  std::string Path(const std::string& name) const { return absl::StrCat(dir_, "/", name); }

  void StartCoordinator() {
    CoordinatorProcessOptions options;
    options.binary = Runfile("coordinator/coordinator");
    options.data_dir = Path("data");
    options.work_dir = dir_;
    options.keep_port_across_restarts = true;
    coordinator_ = std::make_unique<CoordinatorProcess>(options);
    const absl::Status started = coordinator_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  // train_ddp.py and its arguments, after the agent's own flags.
  // Every agent's log has a root-cause summary that contains each of
  // `expected`, and no unknown pid anywhere.
  void ExpectRootCauseSummary(const std::vector<const AgentProcess*>& agents,
                              const std::vector<std::string>& expected) const {
    for (const AgentProcess* agent : agents) {
      const std::string log = agent->log();
      const size_t summary = log.find("Root Cause (first observed failure)");
      ASSERT_NE(summary, std::string::npos) << log;
      const std::string root = log.substr(summary);
      for (const std::string& text : expected) {
        EXPECT_TRUE(absl::StrContains(root, text)) << "no '" << text << "' in:\n" << log;
      }
      EXPECT_FALSE(absl::StrContains(log, "(pid: 0)")) << log;
    }
  }

  std::vector<std::string> Train(int steps, const std::string& step_seconds,
                                 std::vector<std::string> more = {}) const {
    std::vector<std::string> args = {Runfile("examples/train_ddp.py"),
                                     "--steps",
                                     absl::StrCat(steps),
                                     "--step-seconds",
                                     step_seconds,
                                     "--backend",
                                     "gloo",
                                     "--checkpoint-dir",
                                     Path("checkpoints"),
                                     "--result-dir",
                                     Path("results")};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  AgentProcess& StartAgent(const std::string& node, const std::vector<std::string>& launch,
                           const std::vector<std::string>& train) {
    std::vector<std::string> args = {"--coordinator",
                                     coordinator_->address(),
                                     "--job",
                                     kJob,
                                     "--node-id",
                                     node,
                                     "--local-addr",
                                     "127.0.0.1",
                                     "--log-dir",
                                     Path("logs"),
                                     "--rdzv-conf",
                                     "heartbeat_timeout=2,last_call_timeout=1,join_timeout=60",
                                     "--shutdown-timeout",
                                     "3",
                                     "--connect-timeout",
                                     "30",
                                     "--nproc-per-node",
                                     "2"};
    args.insert(args.end(), launch.begin(), launch.end());
    args.insert(args.end(), train.begin(), train.end());
    return Launch(node, args);
  }

  AgentProcess& Launch(const std::string& node, const std::vector<std::string>& args) {
    AgentProcessOptions options;
    options.binary = Runfile("client/agent/ddp-client");
    options.args = args;
    options.log_path = Path(node + ".log");
    options.env = {"PYTHON_EXEC=/usr/bin/python3", "GLOO_SOCKET_IFNAME=lo",
                   // As TorchX and SageMaker give the launcher its own.
                   absl::StrCat("TORCHELASTIC_ERROR_FILE=", Path(node + ".launcher_error.json")),
                   absl::StrCat("PATH=", Runfile("coordinator"), ":", getenv("PATH"))};
    agents_.push_back(std::make_unique<AgentProcess>(options));
    return *agents_.back();
  }

  // Both agents' output, for assertions and failure messages.
  std::string Logs() const {
    std::string out;
    for (const auto& agent : agents_) absl::StrAppend(&out, agent->log());
    return out;
  }

  // True once some agent printed `text`.
  bool WaitForLog(const std::string& text) {
    return PollUntil([&] { return absl::StrContains(Logs(), text); }, kBound);
  }

  RankResult Result(int rank) const {
    RankResult result;
    const std::string json = ReadWholeFile(Path(absl::StrCat("results/rank", rank, ".txt")));
    if (json.empty()) return result;
    result.present = true;
    result.world_size = JsonInt(json, "world_size");
    result.restart = JsonInt(json, "restart");
    const std::string prefix = "\"checksum\": \"";
    const size_t at = json.find(prefix);
    if (at != std::string::npos) {
      result.checksum = json.substr(at + prefix.size(), 64);
    }
    return result;
  }

  // Ranks 0..world_size-1 wrote results with this world size and restart
  // count, and DDP kept one set of parameters: one checksum everywhere.
  void ExpectTrainedTogether(int world_size, int restart) {
    const RankResult first = Result(0);
    ASSERT_TRUE(first.present) << Logs();
    EXPECT_EQ(first.checksum.size(), 64u);
    for (int rank = 0; rank < world_size; ++rank) {
      const RankResult result = Result(rank);
      ASSERT_TRUE(result.present) << "rank " << rank << "\n" << Logs();
      EXPECT_EQ(result.world_size, world_size) << "rank " << rank;
      EXPECT_EQ(result.restart, restart) << "rank " << rank;
      EXPECT_EQ(result.checksum, first.checksum) << "rank " << rank;
    }
    EXPECT_FALSE(Result(world_size).present) << "a rank beyond the world";
  }

  // True once `a` and `b` run in one 4-rank generation and training is under
  // way (rank 0 logged its first step).
  bool BothTrainingInOneWorld(const AgentProcess& a, const AgentProcess& b) {
    return PollUntil(
        [&] {
          return absl::StrContains(a.log(), " of 4,") && absl::StrContains(b.log(), " of 4,") &&
                 absl::StrContains(Logs(), "step 0 loss");
        },
        kBound);
  }

  bool AnyResult() const {
    for (int rank = 0; rank < 4; ++rank) {
      if (Result(rank).present) return true;
    }
    return false;
  }

  // The agent's processes (workers), seen while it runs.
  std::set<pid_t> ProcessesOf(const AgentProcess& agent) const {
    return Descendants(ReadProcessTable(), agent.pid());
  }

  // After `agent` exited: none of `started` is in the process table (not
  // even as a zombie), no process is left in their process groups or in the
  // agent's, and the test's own children are only the coordinator and
  // `others`.
  void ExpectNothingLeft(pid_t agent, const std::set<pid_t>& started,
                         const std::set<pid_t>& others) {
    const std::map<pid_t, ProcessEntry> table = ReadProcessTable();
    std::set<pid_t> groups = {agent};
    for (pid_t pid : started) groups.insert(pid);
    std::set<pid_t> left;
    for (const auto& [pid, entry] : table) {
      if (started.count(pid) || groups.count(entry.pgid)) left.insert(pid);
      if (entry.ppid == getpid() && entry.command != "coordinator" && !others.count(pid)) {
        left.insert(pid);  // an orphan re-parented to the test
      }
    }
    EXPECT_TRUE(left.empty()) << Describe(table, left);
  }

  std::string dir_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

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
    EXPECT_TRUE(absl::StrContains(
        logs, absl::StrCat("rank ", rank, " resumed from step 5")))
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
    std::vector<std::string> out = {"--rdzv-backend", "c10d", "--rdzv-endpoint",
                                    absl::StrCat("127.0.0.1:", port), "--rdzv-id", kJob,
                                    "--node-id", node, "--local-addr", "127.0.0.1",
                                    "--nnodes", "2", "--nproc-per-node", "2",
                                    "--rdzv-conf", "last_call_timeout=1,join_timeout=60",
                                    "--log-dir", Path("logs")};
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
    std::vector<std::string> out = {"--nnodes", "2", "--node-rank", absl::StrCat(node_rank),
                                    "--master-addr", "127.0.0.1", "--master-port",
                                    absl::StrCat(port), "--nproc-per-node", "2",
                                    "--node-id", absl::StrCat("static-", node_rank),
                                    "--local-addr", "127.0.0.1", "--rdzv-conf",
                                    "last_call_timeout=1,join_timeout=60", "--log-dir",
                                    Path("logs")};
    for (const std::string& arg : Train(8, "0")) out.push_back(arg);
    return out;
  };
  // Node rank 1 first: it waits for the master's agent to serve.
  AgentProcess& b = Launch("node-1", args(1));
  AgentProcess& a = Launch("node-0", args(0));
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  EXPECT_TRUE(absl::StrContains(a.log(), absl::StrCat("ranks [0, 2) of 4, group rank 0/2, "
                                                      "master 127.0.0.1:", port)))
      << a.log();
  EXPECT_TRUE(absl::StrContains(b.log(), "ranks [2, 4) of 4, group rank 1/2")) << b.log();
  ExpectTrainedTogether(4, 0);
}

TEST_F(TrainingE2eTest, CoordinatorKilled9AndRestarted_NoWorkerRestart) {
  StartCoordinator();
  const int port = coordinator_->port();
  AgentProcess& a = StartAgent("node-a", {"--nnodes", "2"}, Train(24, "0.25"));
  AgentProcess& b = StartAgent("node-b", {"--nnodes", "2"}, Train(24, "0.25"));
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
  const std::string logs = Logs();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(CountOf(logs, absl::StrCat("rank ", rank, "/4 local_rank")), 1)
        << "rank " << rank << " did not start exactly once\n"
        << logs;
  }
  ExpectTrainedTogether(4, 0);
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
  ExpectRootCauseSummary({&a, &b}, {"rank      : 3 (local_rank: 1)",
                                    absl::StrCat("exitcode  : -", SIGKILL, " (pid: ", rank3, ")"),
                                    "worker 1 (rank 3) on node 'node-",
                                    "failed: signal 9 (SIGKILL); the restart budget",
                                    "max_restarts=0"});
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
  ExpectRootCauseSummary({&a, &b}, {"rank      : 2 (local_rank: 0)", "exitcode  : 3 (pid: ",
                                    "worker 0 (rank 2) on node 'node-",
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
  EXPECT_TRUE(absl::StrContains(logs, "failed: hang (no heartbeat); restart 1 of 2")) << logs;
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

// Ctrl-C to the agent reaches the workers as SIGINT, so a script's
// `except KeyboardInterrupt:` (a last checkpoint) runs, as under torchrun.
TEST_F(TrainingE2eTest, Sigint_WorkersGetKeyboardInterrupt) {
  const std::string script = Path("kbi.py");
  {
    std::ofstream out(script);
    out << "import os, time\n"
           "out = os.environ['KBI_DIR']\n"
           "open(os.path.join(out, 'ready' + os.environ['LOCAL_RANK']), 'w').close()\n"
           "try:\n"
           "    while True:\n"
           "        time.sleep(0.05)\n"
           "except KeyboardInterrupt:\n"
           "    open(os.path.join(out, 'kbi' + os.environ['LOCAL_RANK']), 'w').close()\n";
  }
  setenv("KBI_DIR", dir_.c_str(), 1);
  AgentProcess& a = Launch("kbi", {"--standalone", "--nproc-per-node", "2", script});
  ASSERT_TRUE(PollUntil(
      [&] {
        return access(Path("ready0").c_str(), F_OK) == 0 &&
               access(Path("ready1").c_str(), F_OK) == 0;
      },
      kBound))
      << a.log();
  ASSERT_TRUE(a.Signal(SIGINT));
  EXPECT_EQ(a.Wait(kBound), kSigintExit) << a.log();
  EXPECT_EQ(access(Path("kbi0").c_str(), F_OK), 0) << a.log();
  EXPECT_EQ(access(Path("kbi1").c_str(), F_OK), 0) << a.log();
  unsetenv("KBI_DIR");
}

}  // namespace
}  // namespace ddp::testing
