#ifndef DDP_TESTS_E2E_TRAINING_FIXTURE_H_
#define DDP_TESTS_E2E_TRAINING_FIXTURE_H_

// The fixture of the end-to-end tests with real processes and real PyTorch:
// a //coordinator process on loopback (or none, for the launcher forms that
// need none), ddp-client processes with examples/train_ddp.py workers over
// gloo. Every wait polls a condition under a loose bound; TearDown kills and
// reaps everything the test started (the test is a child subreaper, so
// orphans come back to it).

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
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

// Loose bound of every wait: 4 PyTorch workers start in ~15 s on 2 cores.
constexpr absl::Duration kBound = absl::Seconds(120);
constexpr absl::Duration kPoll = absl::Milliseconds(50);
constexpr char kJob[] = "train";
constexpr int kSigintExit = 128 + SIGINT;

inline bool PollUntil(const std::function<bool()>& done, absl::Duration bound) {
  const absl::Time deadline = absl::Now() + bound;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(kPoll);
  }
  return true;
}

// A loopback port P such that P and P + 1 are free now (0 if none found).
inline int FreePortPair() {
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

inline int CountOf(const std::string& text, const std::string& needle) {
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

inline int JsonInt(const std::string& json, const std::string& key) {
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
    // Workers die with their agent (PR_SET_PDEATHSIG) a moment after it:
    // give them that moment, so that only what outlives it counts.
    const std::string left = AwaitDescendantsGone(absl::Seconds(5));
    const int leftovers = KillAndReapDescendants(absl::Seconds(10));
    // After a failure, the agents killed above may take their workers along
    // a moment later; only a passing test must have left nothing.
    if (!HasFailure()) {
      EXPECT_EQ(leftovers, 0) << "processes outlived their agent:\n" << left;
    }
  }

  std::string Path(const std::string& name) const { return absl::StrCat(dir_, "/", name); }

  void StartCoordinator() {
    CoordinatorProcessOptions options;
    options.binary = Runfile("coordinator/coordinator");
    options.data_dir = Path("data");
    options.work_dir = dir_;
    options.keep_port_across_restarts = true;
    options.extra_args = coordinator_args_;
    coordinator_ = std::make_unique<CoordinatorProcess>(options);
    const absl::Status started = coordinator_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

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

  // train_ddp.py and its arguments: an agent's entry point (StartAgent's
  // `train`), after its own flags.
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

  // The agent flags of this fixture for `node`: its coordinator (none when
  // neither coordinator_target_ nor coordinator_ is set: the test sets it), job
  // and --rdzv-conf, loopback, logs under the test's directory; a test sets the
  // rest and hands AgentArgs(options) to Launch.
  AgentArgsOptions AgentOptions(const std::string& node) const {
    AgentArgsOptions options;
    if (!coordinator_target_.empty()) {
      options.coordinator = coordinator_target_;
    } else if (coordinator_ != nullptr) {
      options.coordinator = coordinator_->address();
    }
    options.job = job_;
    options.node_id = node;
    options.local_addr = "127.0.0.1";
    options.log_dir = Path("logs");
    options.rdzv_conf = rdzv_conf_;
    return options;
  }

  // The usual agent: 2 workers running `train` (e.g. Train(...)), with
  // `launch` flags after the fixture's own.
  AgentProcess& StartAgent(const std::string& node, const std::vector<std::string>& launch,
                           const std::vector<std::string>& train) {
    AgentArgsOptions options = AgentOptions(node);
    options.nproc_per_node = 2;
    options.connect_timeout_s = 30;
    options.shutdown_timeout_s = 3;
    options.flags = launch;
    options.entrypoint = train;
    return Launch(node, AgentArgs(options));
  }

  AgentProcess& Launch(const std::string& node, const std::vector<std::string>& args) {
    AgentProcessOptions options;
    options.binary = Runfile("client/agent/ddp-client");
    options.args = args;
    if (!launch_prefix_.empty()) {  // e.g. ip netns exec NAME ddp-client ARGS
      options.args = std::vector<std::string>(launch_prefix_.begin() + 1, launch_prefix_.end());
      options.args.push_back(options.binary);
      options.args.insert(options.args.end(), args.begin(), args.end());
      options.binary = launch_prefix_.front();
    }
    options.log_path = Path(node + ".log");
    options.env = {"PYTHON_EXEC=/usr/bin/python3", "GLOO_SOCKET_IFNAME=lo",
                   // As TorchX and SageMaker give the launcher its own.
                   absl::StrCat("TORCHELASTIC_ERROR_FILE=", Path(node + ".launcher_error.json")),
                   absl::StrCat("PATH=", Runfile("coordinator"), ":", getenv("PATH")),
                   // The tests read the agents' INFO lines (quiet by default in
                   // the standalone, c10d and static forms); agent_env_ may
                   // override it.
                   "DDP_LOG_LEVEL=info"};
    options.env.insert(options.env.end(), agent_env_.begin(), agent_env_.end());
    agents_.push_back(std::make_unique<AgentProcess>(options));
    return *agents_.back();
  }

  // Every event of the job so far, from its first (they survive coordinator
  // restarts), one JSON object a line (`ddpctl --json jobs watch JOB
  // --from-index 1`; it ends once the job finished).
  std::string JobEvents() const {
    return RunShell(absl::StrCat(Runfile("tools/ddpctl/ddpctl"), " --coordinator ",
                                 coordinator_->address(), " --json jobs watch ", job_,
                                 " --from-index 1"))
        .output;
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

  // Every rank of a `world_size` job started exactly once (a coordinator
  // outage restarted no worker), and trained together in one generation.
  void ExpectEveryRankStartedOnce(int world_size) {
    const std::string logs = Logs();
    for (int rank = 0; rank < world_size; ++rank) {
      EXPECT_EQ(CountOf(logs, absl::StrCat("rank ", rank, "/", world_size, " local_rank")), 1)
          << "rank " << rank << " did not start exactly once\n"
          << logs;
    }
    ExpectTrainedTogether(world_size, 0);  // TORCHELASTIC_RESTART_COUNT stayed 0
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
  std::string job_ = kJob;  // the agents' --job
  // Set before StartCoordinator / StartAgent: the coordinator's extra flags
  // and the agents' extra environment ("NAME=value").
  std::vector<std::string> coordinator_args_;
  std::vector<std::string> agent_env_;
  // The agents' --rdzv-conf: short timeouts for quick tests; the continuity
  // tests drop heartbeat_timeout to run with the job's default (3 s).
  std::string rdzv_conf_ = "heartbeat_timeout=2,last_call_timeout=1,join_timeout=60";
  // Set before StartAgent / Launch: the agent runs as PREFIX... ddp-client
  // ARGS (e.g. NetworkNamespace::ExecPrefix()).
  std::vector<std::string> launch_prefix_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
  // The agents' --coordinator when set (several coordinators); else
  // coordinator_'s address.
  std::string coordinator_target_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

}  // namespace ddp::testing

#endif  // DDP_TESTS_E2E_TRAINING_FIXTURE_H_
