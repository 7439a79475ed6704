// Authorization end to end with real processes: the coordinator binary with
// --admin-token-file; ddpctl, REST and a ddp-client job with and without the
// token (--token-file, DDP_TOKEN).

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"
#include "tests/e2e/agent_process.h"

namespace ddp::testing {
namespace {

constexpr char kAdminToken[] = "admin-token-for-the-auth-e2e-test";

class AuthE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    token_file_ = dir_ + "-admin.token";
    std::ofstream(token_file_) << kAdminToken << "\n";
    std::ofstream(dir_ + "-wrong.token") << "not-the-admin-token-at-all\n";
    CoordinatorProcessOptions options;
    options.binary = CoordinatorBinaryFromRunfiles();
    options.data_dir = dir_ + "-data";
    options.work_dir = std::getenv("TEST_TMPDIR");
    options.extra_args = {"--admin-token-file", token_file_, "--http-port", "-1",
                          "--http-port-file", dir_ + "-http.port"};
    coordinator_ = std::make_unique<CoordinatorProcess>(options);
    absl::Status started = coordinator_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }
  ShellResult Ddpctl(const std::string& args) const {
    return RunShell(absl::StrCat(Runfile("tools/ddpctl/ddpctl"), " --coordinator ",
                                 coordinator_->address(), " ", args));
  }
  // A one-node ddp-client job `job` whose one worker runs `script`.
  AgentProcessOptions Agent(const std::string& job, const std::string& script,
                            const std::string& log) const {
    AgentProcessOptions agent;
    agent.binary = Runfile("client/agent/ddp-client");
    agent.args = AgentArgs({.coordinator = coordinator_->address(),
                            .job = job,
                            .node_id = "n",
                            .nnodes = "1",
                            .nproc_per_node = 1,
                            .connect_timeout_s = 20,
                            .no_python = true,
                            .entrypoint = {"/bin/sh", "-c", script}});
    agent.log_path = dir_ + "-" + log;
    return agent;
  }
  std::string HttpBase() const {
    std::string port = ReadWholeFile(dir_ + "-http.port");
    while (!port.empty() && (port.back() == '\n' || port.back() == ' ')) port.pop_back();
    return "http://127.0.0.1:" + port;
  }

  std::string dir_;
  std::string token_file_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
};

TEST_F(AuthE2eTest, NothingWithoutTheToken_EverythingWithIt) {
  const ShellResult none = Ddpctl("jobs create a-1");
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_TRUE(absl::StrContains(none.output, "UNAUTHENTICATED")) << none.output;
  EXPECT_TRUE(absl::StrContains(none.output, "DDP_TOKEN")) << none.output;
  const ShellResult wrong = Ddpctl(absl::StrCat("--token-file ", dir_, "-wrong.token kv get k"));
  EXPECT_TRUE(absl::StrContains(wrong.output, "UNAUTHENTICATED")) << wrong.output;
  EXPECT_FALSE(absl::StrContains(wrong.output, "not-the-admin-token")) << wrong.output;
  const ShellResult admin = Ddpctl("--token-file " + token_file_ + " jobs create a-1");
  EXPECT_EQ(admin.exit_code, 0) << admin.output;
  const ShellResult env =
      RunShell(absl::StrCat("DDP_TOKEN=", kAdminToken, " ", Runfile("tools/ddpctl/ddpctl"),
                            " --coordinator ", coordinator_->address(), " kv put k v"));
  EXPECT_EQ(env.exit_code, 0) << env.output;

  // REST: the same rules through the gateway (the header is forwarded).
  const ShellResult rest_none =
      RunShell("curl -s -o /dev/null -w '%{http_code}' " + HttpBase() + "/v1/jobs");
  EXPECT_EQ(rest_none.output, "401") << rest_none.output;
  const ShellResult rest_admin =
      RunShell(absl::StrCat("curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer ",
                            kAdminToken, "' ", HttpBase(), "/v1/jobs"));
  EXPECT_EQ(rest_admin.output, "200") << rest_admin.output;

  // An agent without the token is refused at once (exit 2); with it, its job
  // runs and its workers get the token.
  AgentProcessOptions agent =
      Agent("auth-job", "test -n \"$DDP_TOKEN\" && echo worker has a token", "refused.log");
  AgentProcess refused(agent);
  EXPECT_EQ(refused.Wait(absl::Seconds(30)), 2) << refused.log();
  EXPECT_TRUE(absl::StrContains(refused.log(), "UNAUTHENTICATED")) << refused.log();
  agent.log_path = dir_ + "-admitted.log";
  agent.env = {absl::StrCat("DDP_TOKEN=", kAdminToken)};
  AgentProcess admitted(agent);
  EXPECT_EQ(admitted.Wait(absl::Seconds(60)), 0) << admitted.log();
  EXPECT_TRUE(absl::StrContains(admitted.log(), "worker has a token")) << admitted.log();
  EXPECT_FALSE(absl::StrContains(ReadWholeFile(coordinator_->log_path()), kAdminToken));
}

// A job token: issued by CreateJob (its hash stored with the job), good for
// the job's agents, its reads and its key namespace only, across a restart,
// until revoked.
TEST_F(AuthE2eTest, JobToken_ScopedToItsJob_SurvivesARestart_Revocable) {
  const std::string admin = "--token-file " + token_file_ + " ";
  const ShellResult created =
      Ddpctl(admin + "jobs create tok-job --nnodes 1 --nproc-per-node 1 --max-restarts 0");
  ASSERT_EQ(created.exit_code, 0) << created.output;
  const size_t at = created.output.find("token: ");
  ASSERT_NE(at, std::string::npos) << created.output;
  const std::string token = created.output.substr(at + 7, created.output.find('\n', at) - at - 7);
  ASSERT_GE(token.size(), 40u) << created.output;
  ASSERT_EQ(Ddpctl(admin + "jobs create other-job").exit_code, 0);
  const std::string job = absl::StrCat("DDP_TOKEN=", token, " ");
  auto as_job = [&](const std::string& args) {
    return RunShell(absl::StrCat(job, Runfile("tools/ddpctl/ddpctl"), " --coordinator ",
                                 coordinator_->address(), " ", args));
  };
  EXPECT_EQ(as_job("kv put --namespace tok-job k v").exit_code, 0);
  EXPECT_TRUE(absl::StrContains(as_job("kv put --namespace other-job k v").output,
                                "PERMISSION_DENIED"));
  EXPECT_TRUE(absl::StrContains(as_job("jobs get other-job").output, "PERMISSION_DENIED"));
  EXPECT_TRUE(absl::StrContains(as_job("jobs cancel tok-job").output, "PERMISSION_DENIED"));
  const ShellResult listed = as_job("jobs list");
  EXPECT_TRUE(absl::StrContains(listed.output, "tok-job")) << listed.output;
  EXPECT_FALSE(absl::StrContains(listed.output, "other-job")) << listed.output;

  // The job's agent runs with the job's token.
  AgentProcessOptions agent = Agent("tok-job", "echo ran with the job token", "job-agent.log");
  agent.env = {"DDP_TOKEN=" + token};
  AgentProcess process(agent);
  EXPECT_EQ(process.Wait(absl::Seconds(60)), 0) << process.log();

  // Stored hashed: still valid after a restart.
  ASSERT_EQ(coordinator_->Terminate(), 0);
  ASSERT_TRUE(coordinator_->Start().ok());
  EXPECT_EQ(as_job("--timeout 20s jobs get tok-job").exit_code, 0);
  // A new token: alone on stdout, for TOKEN=$(ddpctl jobs token J).
  // (RunShell adds 2>&1: the pipe keeps ddpctl's stderr out of the output.)
  const ShellResult rotated = Ddpctl(admin + "jobs token tok-job 2>/dev/null | cat");
  EXPECT_THAT(rotated.output, ::testing::MatchesRegex("[^ \n]{40,}\n")) << rotated.output;
  ASSERT_EQ(Ddpctl(admin + "jobs token tok-job --revoke").exit_code, 0);
  EXPECT_TRUE(absl::StrContains(as_job("jobs get tok-job").output, "UNAUTHENTICATED"));
  EXPECT_FALSE(absl::StrContains(ReadWholeFile(coordinator_->log_path()), token));
}

TEST_F(AuthE2eTest, ShortTokenFile_CoordinatorRefusesToStartNamingIt) {
  std::ofstream(dir_ + "-short.token") << "short\n";
  const ShellResult bad = RunShell(absl::StrCat(Runfile("coordinator/coordinator"),
                                                " --port 0 --http-port 0 --data-dir ", dir_,
                                                "-bad --admin-token-file ", dir_, "-short.token"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(absl::StrContains(bad.output, "at least 16 bytes")) << bad.output;
  EXPECT_FALSE(absl::StrContains(bad.output, "short\n")) << bad.output;
}

}  // namespace
}  // namespace ddp::testing
