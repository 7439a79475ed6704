// End to end: real ddp-client processes (the binary) against the real
// coordinator session service (JobServices, in-memory state) served by an
// in-process gRPC server on port 0, with real /bin/sh and PyTorch workers.
// (Once //coordinator:coordinator serves SessionService, the same cases can
// run against that binary by swapping CoordinatorUnderTest.)

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/session/job_services.h"
#include "coordinator/session/testing/with_own_commit_loop.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

constexpr absl::Duration kProcessTimeout = absl::Seconds(90);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class CoordinatorUnderTest {
 public:
  // `store` (may be null) keeps the jobs across a restart; `port` 0: any.
  explicit CoordinatorUnderTest(rendezvous::JobStateStore* store = nullptr, int port = 0) {
    session::JobServicesOptions options;
    options.rendezvous.tick_interval = absl::Milliseconds(20);
    auto services = session::StartJobServicesWithLoop(RealClock::Get(), store, options);
    EXPECT_TRUE(services.ok()) << services.status();
    services_ = std::move(*services);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                             &port_);
    services_->RegisterWith(builder);
    server_ = builder.BuildAndStart();
    EXPECT_NE(server_, nullptr);
    address_ = absl::StrCat("127.0.0.1:", port_);
  }
  int port() const { return port_; }
  ~CoordinatorUnderTest() {
    services_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  const std::string& address() const { return address_; }

 private:
  session::JobServicesWithLoop services_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
};

// One ddp-client process; stdout+stderr go to a file.
class AgentProcess {
 public:
  AgentProcess(const std::vector<std::string>& args, const std::string& log,
               const std::vector<std::string>& extra_env = {})
      : log_(log) {
    std::vector<std::string> argv = {absl::StrCat(
        getenv("TEST_SRCDIR"), "/", getenv("TEST_WORKSPACE"), "/client/agent/ddp-client")};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      for (const std::string& kv : extra_env) putenv(strdup(kv.c_str()));
      std::vector<char*> raw;
      for (std::string& a : argv) raw.push_back(a.data());
      raw.push_back(nullptr);
      execv(raw[0], raw.data());
      _exit(127);
    }
  }
  ~AgentProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // The exit code (128+N for a signal), or -1 after kProcessTimeout.
  int Wait() {
    const absl::Time deadline = absl::Now() + kProcessTimeout;
    int status = 0;
    while (absl::Now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return -1;
  }
  pid_t pid() const { return pid_; }
  std::string log() const { return ReadFile(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
};

class AgentE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    mkdir(dir_.c_str(), 0755);
  }
  // Flags every agent of a test shares, then the node's own.
  std::vector<std::string> Flags(const std::string& job, const std::string& node,
                                 std::vector<std::string> more) {
    std::vector<std::string> flags = {"--coordinator",
                                      Address(),
                                      "--job",
                                      job,
                                      "--node-id",
                                      node,
                                      "--local-addr",
                                      "127.0.0.1",
                                      "--log-dir",
                                      dir_,
                                      "--rdzv-conf",
                                      "heartbeat_timeout=2,last_call_timeout=1",
                                      "--shutdown-timeout",
                                      "5",
                                      "--connect-timeout",
                                      "10"};
    flags.insert(flags.end(), more.begin(), more.end());
    return flags;
  }
  std::string Log(const std::string& name) { return dir_ + "/" + name; }

  std::string Address() const { return coordinator_->address(); }

  rendezvous::InMemoryJobStateStore store_;
  std::unique_ptr<CoordinatorUnderTest> coordinator_ =
      std::make_unique<CoordinatorUnderTest>(&store_);
  std::string dir_;
};

TEST_F(AgentE2eTest, TwoAgentsShellWorkers_AllRanksRun_BothExitZero) {
  const std::string script = absl::StrCat(
      "echo $RANK $LOCAL_RANK $WORLD_SIZE $GROUP_RANK $MASTER_ADDR > ", dir_, "/rank_$RANK");
  std::vector<std::string> worker = {
      "--nnodes", "2", "--nproc-per-node", "2", "--no-python", "/bin/sh", "-c", script};
  AgentProcess a(Flags("shell", "node-a", worker), Log("a.log"));
  AgentProcess b(Flags("shell", "node-b", worker), Log("b.log"));
  EXPECT_EQ(a.Wait(), 0) << a.log();
  EXPECT_EQ(b.Wait(), 0) << b.log();
  for (int rank = 0; rank < 4; ++rank) {
    std::string line = ReadFile(absl::StrCat(dir_, "/rank_", rank));
    EXPECT_EQ(line, absl::StrCat(rank, " ", rank % 2, " 4 ", rank / 2, " 127.0.0.1\n"))
        << "rank " << rank;
  }
}

// ROLE_RANK and ROLE_WORLD_SIZE count per --role across nodes, as torchrun's.
TEST_F(AgentE2eTest, TwoRoles_RoleRanksCountedPerRole) {
  const std::string script =
      absl::StrCat("echo $ROLE_NAME $ROLE_RANK $ROLE_WORLD_SIZE > ", dir_, "/rank_$RANK");
  auto worker = [&](const std::string& role, const std::string& nproc) {
    return std::vector<std::string>{
        "--nnodes",         "2",       "--role",      role,
        "--nproc-per-node", nproc,     "--node-rank", role == "trainer" ? "0" : "1",
        "--no-python",      "/bin/sh", "-c",          script};
  };
  AgentProcess a(Flags("roles", "node-a", worker("trainer", "2")), Log("a.log"));
  AgentProcess b(Flags("roles", "node-b", worker("reader", "1")), Log("b.log"));
  EXPECT_EQ(a.Wait(), 0) << a.log();
  EXPECT_EQ(b.Wait(), 0) << b.log();
  EXPECT_EQ(ReadFile(dir_ + "/rank_0"), "trainer 0 2\n");
  EXPECT_EQ(ReadFile(dir_ + "/rank_1"), "trainer 1 2\n");
  EXPECT_EQ(ReadFile(dir_ + "/rank_2"), "reader 0 1\n");
}

TEST_F(AgentE2eTest, WorkerFailsOnce_GroupRestart_SucceedsOnSecondGeneration) {
  // Rank 1 fails in restart 0 (once rank 0 has run); everybody succeeds in
  // restart 1.
  const std::string script =
      absl::StrCat("cd ", dir_,
                   "; echo $TORCHELASTIC_RESTART_COUNT >> runs_$RANK; "
                   "if [ $RANK = 1 ] && [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then "
                   "while [ ! -s runs_0 ]; do sleep 0.02; done; exit 3; fi; "
                   "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exec sleep 30; fi");
  std::vector<std::string> worker = {
      "--nnodes", "2",           "--nproc-per-node", "1",  "--max-restarts",
      "1",        "--no-python", "/bin/sh",          "-c", script};
  AgentProcess a(Flags("restart", "node-a", worker), Log("a.log"));
  AgentProcess b(Flags("restart", "node-b", worker), Log("b.log"));
  EXPECT_EQ(a.Wait(), 0) << a.log();
  EXPECT_EQ(b.Wait(), 0) << b.log();
  EXPECT_EQ(ReadFile(dir_ + "/runs_0"), "0\n1\n");
  EXPECT_EQ(ReadFile(dir_ + "/runs_1"), "0\n1\n");
}

TEST_F(AgentE2eTest, WorkerFailsNoBudget_BothExitOneWithRootCause) {
  const std::string script = "if [ $RANK = 1 ]; then exit 7; fi; exec sleep 30";
  std::vector<std::string> worker = {
      "--nnodes", "2",           "--nproc-per-node", "1",  "--max-restarts",
      "0",        "--no-python", "/bin/sh",          "-c", script};
  AgentProcess a(Flags("fail", "node-a", worker), Log("a.log"));
  AgentProcess b(Flags("fail", "node-b", worker), Log("b.log"));
  EXPECT_EQ(a.Wait(), 1) << a.log();
  EXPECT_EQ(b.Wait(), 1) << b.log();
  for (const std::string& log : {a.log(), b.log()}) {
    EXPECT_NE(log.find("Root Cause (first observed failure)"), std::string::npos) << log;
    EXPECT_NE(log.find("exitcode  : 7"), std::string::npos) << log;
  }
}

TEST_F(AgentE2eTest, Sigterm_WorkersStoppedAgentExits143) {
  const std::string pid_file = dir_ + "/worker.pid";
  std::vector<std::string> worker = {
      "--nnodes", "1",  "--no-python",
      "/bin/sh",  "-c", absl::StrCat("echo $$ > ", pid_file, "; exec sleep 60")};
  AgentProcess a(Flags("sig", "node-a", worker), Log("a.log"));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (ReadFile(pid_file).empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const int worker_pid = atoi(ReadFile(pid_file).c_str());
  ASSERT_GT(worker_pid, 0) << a.log();
  kill(a.pid(), SIGTERM);
  EXPECT_EQ(a.Wait(), 128 + SIGTERM) << a.log();
  EXPECT_NE(kill(worker_pid, 0), 0) << "worker survived the agent";
}

// Rerunning the same command (a scheduler's requeue with a fixed rdzv id):
// the finished job id starts again as a new run, twice.
TEST_F(AgentE2eTest, SameJobIdAfterItFinished_RunsAgain) {
  const std::string runs = dir_ + "/runs";
  std::vector<std::string> worker = {"--nnodes", "1",  "--no-python",
                                     "/bin/sh",  "-c", absl::StrCat("echo run >> ", runs)};
  for (int run = 1; run <= 3; ++run) {
    AgentProcess a(Flags("requeued", "node-a", worker), Log(absl::StrCat("a", run, ".log")));
    EXPECT_EQ(a.Wait(), 0) << "run " << run << ": " << a.log();
  }
  EXPECT_EQ(ReadFile(runs), "run\nrun\nrun\n");
}

TEST_F(AgentE2eTest, CoordinatorRestarts_SessionsResumeWorkersKeepRunning) {
  // Workers start once, wait for the go file, then exit 0.
  const std::string script = absl::StrCat("cd ", dir_,
                                          "; echo $DDP_GENERATION >> runs_$RANK; "
                                          "while [ ! -e go ]; do sleep 0.02; done");
  std::vector<std::string> worker = {"--nnodes", "2", "--no-python", "/bin/sh", "-c", script};
  AgentProcess a(Flags("resume", "node-a", worker), Log("a.log"));
  AgentProcess b(Flags("resume", "node-b", worker), Log("b.log"));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((ReadFile(dir_ + "/runs_0").empty() || ReadFile(dir_ + "/runs_1").empty()) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_FALSE(ReadFile(dir_ + "/runs_1").empty()) << a.log() << b.log();
  const int port = coordinator_->port();
  coordinator_.reset();  // the coordinator goes away; its state is stored
  absl::SleepFor(absl::Milliseconds(300));
  coordinator_ = std::make_unique<CoordinatorUnderTest>(&store_, port);
  while ((a.log().find("session resumed") == std::string::npos ||
          b.log().find("session resumed") == std::string::npos) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::ofstream(dir_ + "/go") << "go";
  EXPECT_EQ(a.Wait(), 0) << a.log();
  EXPECT_EQ(b.Wait(), 0) << b.log();
  EXPECT_NE(a.log().find("session resumed"), std::string::npos) << a.log();
  EXPECT_NE(b.log().find("session resumed"), std::string::npos) << b.log();
  EXPECT_EQ(ReadFile(dir_ + "/runs_0"), "1\n");  // started once, generation 1
  EXPECT_EQ(ReadFile(dir_ + "/runs_1"), "1\n");
}

TEST_F(AgentE2eTest, Standalone_ChildCoordinator_JobSucceeds) {
  const std::string runfiles = absl::StrCat(getenv("TEST_SRCDIR"), "/", getenv("TEST_WORKSPACE"));
  const std::string out = dir_ + "/standalone_out";
  AgentProcess a(
      {"--standalone", "--nproc-per-node", "2", "--log-dir", dir_, "--connect-timeout", "10",
       "--no-python", "/bin/sh", "-c", absl::StrCat("echo $RANK $WORLD_SIZE >> ", out)},
      Log("a.log"), {absl::StrCat("PATH=", runfiles, "/coordinator:", getenv("PATH"))});
  const int code = a.Wait();
  if (code == 2 && a.log().find("does not serve ddp.v1.SessionService") != std::string::npos) {
    GTEST_SKIP() << "//coordinator:coordinator does not serve SessionService "
                    "yet";
  }
  EXPECT_EQ(code, 0) << a.log();
  const std::string lines = ReadFile(out);
  EXPECT_NE(lines.find("0 2\n"), std::string::npos) << lines;
  EXPECT_NE(lines.find("1 2\n"), std::string::npos) << lines;
}

TEST_F(AgentE2eTest, TwoAgentsTwoTorchWorkers_GlooDdpTrains) {
  struct stat st;
  if (stat("/usr/lib/python3/dist-packages/torch", &st) != 0) {
    GTEST_SKIP() << "no torch for /usr/bin/python3";
  }
  const std::string train =
      absl::StrCat(getenv("TEST_SRCDIR"), "/", getenv("TEST_WORKSPACE"), "/examples/train_ddp.py");
  const std::string results = dir_ + "/results";
  mkdir(results.c_str(), 0755);
  std::vector<std::string> worker = {"--nnodes",
                                     "2",
                                     "--nproc-per-node",
                                     "2",
                                     train,
                                     "--steps",
                                     "6",
                                     "--step-seconds",
                                     "0",
                                     "--backend",
                                     "gloo",
                                     "--checkpoint-dir",
                                     dir_,
                                     "--result-dir",
                                     results};
  std::vector<std::string> env = {"PYTHON_EXEC=/usr/bin/python3", "GLOO_SOCKET_IFNAME=lo"};
  AgentProcess a(Flags("torch", "node-a", worker), Log("a.log"), env);
  AgentProcess b(Flags("torch", "node-b", worker), Log("b.log"), env);
  EXPECT_EQ(a.Wait(), 0) << a.log();
  EXPECT_EQ(b.Wait(), 0) << b.log();
  // DDP keeps the parameters identical everywhere: one checksum, 4 ranks.
  auto checksum = [](const std::string& json) {
    const size_t at = json.find("\"checksum\": \"");
    return at == std::string::npos ? std::string() : json.substr(at + 13, 64);
  };
  const std::string first = checksum(ReadFile(results + "/rank0.txt"));
  EXPECT_EQ(first.size(), 64u) << ReadFile(results + "/rank0.txt");
  for (int rank = 1; rank < 4; ++rank) {
    const std::string json = ReadFile(absl::StrCat(results, "/rank", rank, ".txt"));
    EXPECT_EQ(checksum(json), first) << json;
    EXPECT_NE(json.find("\"world_size\": 4"), std::string::npos) << json;
  }
}

}  // namespace
}  // namespace ddp::client
