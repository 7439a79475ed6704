// The //coordinator:coordinator binary as a real process: --port 0 +
// --port-file, "serving on" log line, clean exit 0 on SIGTERM/SIGINT with data
// kept, exit 1 when the data dir is locked by another coordinator, exit 2 on
// bad flags.

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/testing/held_socket.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

std::string TestDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

std::string BinaryPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : ".") + "/ddp_coordinator/coordinator/coordinator";
}

// Starts the binary with `args`; its stderr goes to `log_path`. A positive
// `fd_limit` sets RLIMIT_NOFILE (soft and hard, as `ulimit -n` does) first.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log_path,
            rlim_t fd_limit = 0) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (fd_limit > 0) {
      struct rlimit limit = {fd_limit, fd_limit};
      setrlimit(RLIMIT_NOFILE, &limit);
    }
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    dup2(fd, STDOUT_FILENO);
    std::vector<char*> argv;
    std::string binary = BinaryPath();
    argv.push_back(binary.data());
    std::vector<std::string> copies = args;
    for (std::string& arg : copies) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// The exit code, or -1 if it did not exit within the (loose) bound.
int WaitExit(pid_t pid, absl::Duration bound = absl::Seconds(30)) {
  const absl::Time deadline = absl::Now() + bound;
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// Polls for the port file (written atomically once serving).
int ReadPort(const std::string& path, absl::Duration bound = absl::Seconds(30)) {
  const absl::Time deadline = absl::Now() + bound;
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    int port = 0;
    if (in >> port && port > 0) return port;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int64_t PutAndGetRevision(int port, const std::string& value) {
  auto stub = ddp::v1::KeyValueService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  ddp::v1::PutRequest put;
  put.set_namespace_("job");
  put.set_key("k");
  put.set_value(value);
  ddp::v1::PutResponse response;
  grpc::Status status = stub->Put(&context, put, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.revision();
}

TEST(CoordinatorBinaryTest, PortZero_ServesThenSigtermExitsZeroAndRestartKeepsRevision) {
  const std::string dir = TestDir();
  const std::string port_file = dir + ".port";
  const std::vector<std::string> args = {"--port",     "0", "--bind",      "127.0.0.1",
                                         "--data-dir", dir, "--port-file", port_file};
  pid_t pid = Spawn(args, dir + ".log1");
  int port = ReadPort(port_file);
  ASSERT_GT(port, 0) << ReadFile(dir + ".log1");
  EXPECT_EQ(PutAndGetRevision(port, "a"), 1);
  EXPECT_EQ(PutAndGetRevision(port, "b"), 2);
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
  EXPECT_THAT(ReadFile(dir + ".log1"), HasSubstr("serving on 127.0.0.1:" + std::to_string(port)));

  std::remove(port_file.c_str());
  pid = Spawn(args, dir + ".log2");
  port = ReadPort(port_file);
  ASSERT_GT(port, 0) << ReadFile(dir + ".log2");
  EXPECT_EQ(PutAndGetRevision(port, "c"), 3);
  kill(pid, SIGINT);
  EXPECT_EQ(WaitExit(pid), 0);
}

TEST(CoordinatorBinaryTest, SecondInstance_SameDataDir_ExitsOneNamingDir) {
  const std::string dir = TestDir();
  pid_t first =
      Spawn({"--port=0", "--bind=127.0.0.1", "--data-dir=" + dir, "--port-file=" + dir + ".port1"},
            dir + ".log1");
  ASSERT_GT(ReadPort(dir + ".port1"), 0) << ReadFile(dir + ".log1");
  pid_t second =
      Spawn({"--port=0", "--bind=127.0.0.1", "--data-dir=" + dir, "--port-file=" + dir + ".port2"},
            dir + ".log2");
  EXPECT_EQ(WaitExit(second), 1);
  const std::string log = ReadFile(dir + ".log2");
  EXPECT_THAT(log, HasSubstr(dir));
  EXPECT_THAT(log, HasSubstr("pid " + std::to_string(first)));
  kill(first, SIGTERM);
  EXPECT_EQ(WaitExit(first), 0);
}

TEST(CoordinatorBinaryTest, BadFlags_ExitTwoWithMessage) {
  const std::string dir = TestDir();
  pid_t pid = Spawn({"--port=-5", "--data-dir=" + dir}, dir + ".log1");
  EXPECT_EQ(WaitExit(pid), 2);
  EXPECT_THAT(ReadFile(dir + ".log1"), HasSubstr("--port=-5"));
  pid = Spawn({"--log-level=loud", "--data-dir=" + dir}, dir + ".log2");
  EXPECT_EQ(WaitExit(pid), 2);
  EXPECT_THAT(ReadFile(dir + ".log2"), HasSubstr("--log-level"));
  pid = Spawn({"--max-key-bytes=0", "--data-dir=" + dir}, dir + ".log3");
  EXPECT_EQ(WaitExit(pid), 2);
  pid = Spawn({"--no-such-flag=1", "--data-dir=" + dir}, dir + ".log4");
  EXPECT_EQ(WaitExit(pid), 2);
  EXPECT_THAT(ReadFile(dir + ".log4"), HasSubstr("unknown flag --no_such_flag"));
  pid = Spawn({"--port", "abc", "--data-dir=" + dir}, dir + ".log5");
  EXPECT_EQ(WaitExit(pid), 2);
  EXPECT_THAT(ReadFile(dir + ".log5"), HasSubstr("--port=abc"));
}

TEST(CoordinatorBinaryTest, SecondInstance_SameHttpPort_ExitsFourNamingTheFlag) {
  const std::string dir = TestDir();
  pid_t first = Spawn({"--port=0", "--bind=127.0.0.1", "--data-dir=" + dir + "-a",
                       "--port-file=" + dir + ".port1", "--http-port-file=" + dir + ".http1"},
                      dir + ".log1");
  const int port = ReadPort(dir + ".port1");
  ASSERT_GT(port, 0) << ReadFile(dir + ".log1");
  const int http_port = ReadPort(dir + ".http1");
  ASSERT_GT(http_port, 0) << ReadFile(dir + ".log1");
  pid_t second = Spawn({"--port=0", "--bind=127.0.0.1", "--data-dir=" + dir + "-b",
                        "--http-port=" + std::to_string(http_port)},
                       dir + ".log2");
  EXPECT_EQ(WaitExit(second), 4);
  const std::string log = ReadFile(dir + ".log2");
  EXPECT_THAT(log, HasSubstr("127.0.0.1:" + std::to_string(http_port)));
  EXPECT_THAT(log, HasSubstr("--http-port"));
  pid_t bad = Spawn({"--port=0", "--http-port=70000", "--data-dir=" + dir + "-c"}, dir + ".log3");
  EXPECT_EQ(WaitExit(bad), 2);
  EXPECT_THAT(ReadFile(dir + ".log3"), HasSubstr("--http-port=70000"));
  EXPECT_EQ(PutAndGetRevision(port, "a"), 1) << "the first still serves";
  kill(first, SIGTERM);
  EXPECT_EQ(WaitExit(first), 0);
}

TEST(CoordinatorBinaryTest, SecondInstance_SamePort_ExitsFourNamingAddress) {
  const std::string dir = TestDir();
  pid_t first = Spawn(
      {"--port=0", "--bind=127.0.0.1", "--data-dir=" + dir + "-a", "--port-file=" + dir + ".port1"},
      dir + ".log1");
  const int port = ReadPort(dir + ".port1");
  ASSERT_GT(port, 0) << ReadFile(dir + ".log1");
  pid_t second =
      Spawn({"--port=" + std::to_string(port), "--bind=127.0.0.1", "--data-dir=" + dir + "-b"},
            dir + ".log2");
  EXPECT_EQ(WaitExit(second), 4);
  const std::string log = ReadFile(dir + ".log2");
  EXPECT_THAT(log, HasSubstr("127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(log, HasSubstr("already in use"));
  // The first one still serves every client.
  EXPECT_EQ(PutAndGetRevision(port, "a"), 1);
  kill(first, SIGTERM);
  EXPECT_EQ(WaitExit(first), 0);
}

TEST(CoordinatorBinaryTest, HeartbeatUdp_OnTheGrpcPortsNumber_APortInUseExitsFour) {
  const std::string dir = TestDir();
  pid_t first = Spawn({"--port=0", "--bind=127.0.0.1", "--heartbeat-udp",
                       "--data-dir=" + dir + "-a", "--port-file=" + dir + ".port1"},
                      dir + ".log1");
  const int port = ReadPort(dir + ".port1");
  ASSERT_GT(port, 0) << ReadFile(dir + ".log1");
  EXPECT_THAT(ReadFile(dir + ".log1"),
              HasSubstr("heartbeats over UDP on 127.0.0.1:" + std::to_string(port)));
  // The UDP port is taken (TCP's is free): the second exits 4 naming the flag.
  pid_t second = Spawn({"--port=0", "--bind=127.0.0.1", "--heartbeat-udp",
                        "--heartbeat-udp-port=" + std::to_string(port), "--data-dir=" + dir + "-b"},
                       dir + ".log2");
  EXPECT_EQ(WaitExit(second), 4);
  const std::string log = ReadFile(dir + ".log2");
  EXPECT_THAT(log, HasSubstr("127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(log, HasSubstr("--heartbeat-udp-port"));
  pid_t bad =
      Spawn({"--port=0", "--heartbeat-udp-port=70000", "--data-dir=" + dir + "-c"}, dir + ".log3");
  EXPECT_EQ(WaitExit(bad), 2);
  EXPECT_THAT(ReadFile(dir + ".log3"), HasSubstr("--heartbeat-udp-port=70000"));
  EXPECT_EQ(PutAndGetRevision(port, "a"), 1) << "the first still serves";
  kill(first, SIGTERM);
  EXPECT_EQ(WaitExit(first), 0);
}

// Serves once (one Put) and stops, so the data dir is initialised.
void InitialiseDataDir(const std::string& dir) {
  const std::string port_file = dir + ".init-port";
  pid_t pid =
      Spawn({"--port=0", "--bind=127.0.0.1", "--data-dir=" + dir, "--port-file=" + port_file},
            dir + ".init-log");
  const int port = ReadPort(port_file);
  ASSERT_GT(port, 0) << ReadFile(dir + ".init-log");
  EXPECT_EQ(PutAndGetRevision(port, "a"), 1);
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
}

TEST(CoordinatorBinaryTest, DeletedDatabase_ExitsThreeNamingFile) {
  const std::string dir = TestDir();
  InitialiseDataDir(dir);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::remove((dir + "/coordinator.db" + suffix).c_str());
  }
  pid_t pid = Spawn({"--port=0", "--bind=127.0.0.1", "--data-dir=" + dir}, dir + ".log");
  EXPECT_EQ(WaitExit(pid), 3);
  EXPECT_THAT(ReadFile(dir + ".log"), HasSubstr(dir + "/coordinator.db is missing"));
}

// (A previous release's jobs.db, truncated or missing: tests/migration.)
TEST(CoordinatorBinaryTest, TruncatedDatabase_ExitsThree) {
  const std::string dir = TestDir();
  InitialiseDataDir(dir);
  std::remove((dir + "/coordinator.db-wal").c_str());
  std::remove((dir + "/coordinator.db-shm").c_str());
  ASSERT_EQ(truncate((dir + "/coordinator.db").c_str(), 0), 0);
  pid_t pid = Spawn({"--port=0", "--bind=127.0.0.1", "--data-dir=" + dir}, dir + ".log");
  EXPECT_EQ(WaitExit(pid), 3);
  EXPECT_THAT(ReadFile(dir + ".log"), HasSubstr(dir + "/coordinator.db is empty"));
}

TEST(CoordinatorBinaryTest, Help_ExitsZero) {
  const std::string dir = TestDir();
  for (const char* flag : {"--help", "-h", "--helpfull"}) {
    pid_t pid = Spawn({flag}, dir + ".log");
    EXPECT_EQ(WaitExit(pid), 0) << flag;
  }
}

TEST(CoordinatorBinaryTest, Help_GroupedByTopicWithEveryFlagAndTheDefaultDataDir) {
  const std::string dir = TestDir();
  pid_t pid = Spawn({"--help"}, dir + ".log");
  ASSERT_EQ(WaitExit(pid), 0);
  const std::string help = ReadFile(dir + ".log");
  EXPECT_THAT(help, Not(HasSubstr("UNKNOWN")));
  EXPECT_THAT(help, Not(HasSubstr("Ungrouped")));
  size_t at = 0;
  for (const char* title : {"\nStorage\n", "\nNetwork and listeners\n", "\nTLS and authorization\n",
                            "\nHigh availability", "\nLimits and timing\n", "\nLogging\n"}) {
    const size_t found = help.find(title, at);
    ASSERT_NE(found, std::string::npos) << title << " (in order) in:\n" << help;
    at = found;
  }
  EXPECT_THAT(help, HasSubstr("--data-dir (default: ./ddp-coordinator-data)"));
  EXPECT_THAT(help, HasSubstr("--tls-cert"));
}

// README, docs/operations.md and --help name one default data dir, and every
// example that gives one names the same service path.
TEST(CoordinatorBinaryTest, DefaultDataDir_SameInHelpReadmeAndOperationsDoc) {
  const std::string dir = TestDir();
  pid_t pid = Spawn({"--help"}, dir + ".log");
  ASSERT_EQ(WaitExit(pid), 0);
  EXPECT_THAT(ReadFile(dir + ".log"), HasSubstr("--data-dir (default: ./ddp-coordinator-data)"));
  for (const char* doc : {"README.md", "docs/operations.md"}) {
    const std::string text = ReadFile(doc);
    ASSERT_FALSE(text.empty()) << doc << " is a data dependency of this test";
    EXPECT_THAT(text, HasSubstr("./ddp-coordinator-data")) << doc;
    for (size_t at = text.find("/var/lib/ddp"); at != std::string::npos;
         at = text.find("/var/lib/ddp", at + 1)) {
      const size_t end = at + 24;
      const bool same = text.compare(at, 24, "/var/lib/ddp-coordinator") == 0 &&
                        (end == text.size() || !(std::isalnum(text[end]) || text[end] == '-' ||
                                                 text[end] == '_' || text[end] == '.'));
      EXPECT_TRUE(same) << doc << ": another data dir name: " << text.substr(at, 30);
    }
  }
}

TEST(CoordinatorBinaryTest, Version_PrintsTheVersionKvStatusReportsAndTheBuildMode) {
  const std::string dir = TestDir();
  pid_t pid = Spawn({"--version"}, dir + ".log");
  ASSERT_EQ(WaitExit(pid), 0);
  EXPECT_THAT(ReadFile(dir + ".log"),
              MatchesRegex("coordinator 0\\.1\\.0 \\((release|development) build\\)\n"));
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

TEST(CoordinatorBinaryTest, PortTaken_OneLineNamingPortAndFlag_ExitsFourBeforeCreatingDataDir) {
  const std::string dir = TestDir();
  ddp::testing::HeldSocket held;
  ASSERT_TRUE(held.ok());
  const int port = held.port();
  pid_t pid = Spawn({"--port=" + std::to_string(port), "--http-port=0", "--data-dir=" + dir},
                    dir + ".log1");
  EXPECT_EQ(WaitExit(pid), 4);
  const std::string log = ReadFile(dir + ".log1");
  EXPECT_THAT(
      log, MatchesRegex("coordinator: cannot listen for gRPC on 127\\.0\\.0\\.1:" +
                        std::to_string(port) + ": the address is already in use [^\n]*--port\n"));
  EXPECT_FALSE(Exists(dir)) << "the data dir was created before the port check";
  // The HTTP port taken: the same, naming --http-port.
  pid = Spawn({"--port=0", "--http-port=" + std::to_string(port), "--data-dir=" + dir},
              dir + ".log2");
  EXPECT_EQ(WaitExit(pid), 4);
  EXPECT_THAT(ReadFile(dir + ".log2"),
              MatchesRegex("coordinator: cannot listen for HTTP [^\n]*--http-port\n"));
  EXPECT_FALSE(Exists(dir));
}

TEST(CoordinatorBinaryTest, NoTokenNoBind_ServesOnLoopbackOnly_TokenServesEveryInterface) {
  const std::string dir = TestDir();
  pid_t pid = Spawn({"--port=0", "--data-dir=" + dir + "-a", "--port-file=" + dir + ".port1"},
                    dir + ".log1");
  int port = ReadPort(dir + ".port1");
  ASSERT_GT(port, 0) << ReadFile(dir + ".log1");
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
  std::string log = ReadFile(dir + ".log1");
  EXPECT_THAT(log, HasSubstr("serving on 127.0.0.1:" + std::to_string(port)));
  EXPECT_THAT(log, HasSubstr("listening on 127.0.0.1 only"));
  EXPECT_THAT(log, Not(HasSubstr("no authorization on")));

  const std::string token = dir + ".token";
  std::ofstream(token) << "0123456789abcdef0123456789abcdef\n";
  pid = Spawn({"--port=0", "--data-dir=" + dir + "-b", "--port-file=" + dir + ".port2",
               "--admin-token-file=" + token},
              dir + ".log2");
  port = ReadPort(dir + ".port2");
  ASSERT_GT(port, 0) << ReadFile(dir + ".log2");
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
  EXPECT_THAT(ReadFile(dir + ".log2"), HasSubstr("serving on 0.0.0.0:" + std::to_string(port)));

  // An explicit non-loopback bind without authorization keeps the warning.
  pid = Spawn(
      {"--port=0", "--bind=0.0.0.0", "--data-dir=" + dir + "-c", "--port-file=" + dir + ".port3"},
      dir + ".log3");
  ASSERT_GT(ReadPort(dir + ".port3"), 0) << ReadFile(dir + ".log3");
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
  EXPECT_THAT(ReadFile(dir + ".log3"), HasSubstr("no authorization on 0.0.0.0"));
}

// `ulimit -n 256` and 300 connections that never speak: the coordinator
// refuses the excess, keeps descriptors for itself, and serves again as soon
// as the flood ends (gRPC alone would stop accepting for good on EMFILE).
TEST(CoordinatorBinaryTest, ConnectionFloodOverDescriptorLimit_ServesAgainAfterwards) {
  const std::string dir = TestDir();
  const std::string port_file = dir + ".port";
  pid_t pid =
      Spawn({"--port=0", "--bind=127.0.0.1", "--data-dir=" + dir, "--port-file=" + port_file},
            dir + ".log", /*fd_limit=*/256);
  const int port = ReadPort(port_file);
  ASSERT_GT(port, 0) << ReadFile(dir + ".log");
  EXPECT_THAT(ReadFile(dir + ".log"), HasSubstr("descriptor limit 256"));
  std::vector<int> flood;
  for (int i = 0; i < 300; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    flood.push_back(fd);
  }
  absl::SleepFor(absl::Seconds(1));  // the coordinator accepts (and refuses)
  for (int fd : flood) close(fd);
  // Served again within a loose bound once the flood is gone.
  auto stub = ddp::v1::KeyValueService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  bool served = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!served && absl::Now() < deadline) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    ddp::v1::PutRequest put;
    put.set_namespace_("job");
    put.set_key("after-flood");
    put.set_value("v");
    ddp::v1::PutResponse response;
    served = stub->Put(&context, put, &response).ok();
    if (!served) absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(served) << ReadFile(dir + ".log");
  EXPECT_THAT(ReadFile(dir + ".log"), HasSubstr("refusing connections"));
  kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid), 0);
}

}  // namespace
