// TLS end to end with real processes: the coordinator binary with
// --tls-cert/--tls-key/--tls-client-ca (mTLS), a ddp-client job and ddpctl,
// with certificates made by the openssl command line.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"
#include "tests/e2e/agent_process.h"
#include "tests/tls/test_certs.h"

namespace ddp::testing {
namespace {

class TlsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    absl::Status made = MakeTestPki(dir_ + "-pki", "e2e-ca", &pki_);
    if (!made.ok() && made.message().find("not found") != std::string::npos) {
      GTEST_SKIP() << "no openssl command: " << made;
    }
    ASSERT_TRUE(made.ok()) << made;
    CoordinatorProcessOptions options;
    options.binary = CoordinatorBinaryFromRunfiles();
    options.data_dir = dir_ + "-data";
    options.work_dir = std::getenv("TEST_TMPDIR");
    options.extra_args = {"--tls-cert", pki_.server_cert, "--tls-key", pki_.server_key,
                          "--tls-client-ca", pki_.ca_cert};
    coordinator_ = std::make_unique<CoordinatorProcess>(options);
    absl::Status started = coordinator_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  std::string Ddpctl(const std::string& args) const {
    return absl::StrCat(Runfile("tools/ddpctl/ddpctl"), " --coordinator ",
                        coordinator_->address(), " ", args);
  }
  // The client flags of mTLS.
  std::string TlsFlags() const {
    return absl::StrCat("--tls-ca ", pki_.ca_cert, " --tls-cert ", pki_.client_cert,
                        " --tls-key ", pki_.client_key);
  }

  std::string dir_;
  TestPki pki_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
};

TEST_F(TlsE2eTest, JobRunsOverMtls_DdpctlWithFlagsOrEnvironment_PlaintextRefused) {
  // ddp-client takes the files from DDP_TLS_*.
  AgentProcessOptions agent;
  agent.binary = Runfile("client/agent/ddp-client");
  agent.args = AgentArgs({.coordinator = coordinator_->address(),
                          .job = "tls-job",
                          .node_id = "node-a",
                          .nnodes = "1",
                          .nproc_per_node = 2,
                          .connect_timeout_s = 20,
                          .no_python = true,
                          .entrypoint = {"/bin/sh", "-c", "echo rank $RANK over tls"}});
  agent.log_path = dir_ + "-agent.log";
  agent.env = {"DDP_TLS_CA=" + pki_.ca_cert, "DDP_TLS_CERT=" + pki_.client_cert,
               "DDP_TLS_KEY=" + pki_.client_key};
  AgentProcess process(agent);
  EXPECT_EQ(process.Wait(absl::Seconds(60)), 0) << process.log();
  EXPECT_TRUE(absl::StrContains(process.log(), "rank 1 over tls")) << process.log();

  const ShellResult get = RunShell(Ddpctl(TlsFlags() + " jobs get tls-job"));
  EXPECT_EQ(get.exit_code, 0) << get.output;
  EXPECT_TRUE(absl::StrContains(get.output, "state:       SUCCEEDED")) << get.output;
  const ShellResult env = RunShell(absl::StrCat("DDP_TLS_CA=", pki_.ca_cert, " DDP_TLS_CERT=",
                                        pki_.client_cert, " DDP_TLS_KEY=", pki_.client_key, " ",
                                        Ddpctl("kv put k v")));
  EXPECT_EQ(env.exit_code, 0) << env.output;

  // No client certificate, or no TLS at all: refused (exit 3: not reachable).
  const ShellResult no_cert = RunShell(Ddpctl(absl::StrCat("--timeout 3s --tls-ca ", pki_.ca_cert,
                                                   " jobs get tls-job")));
  EXPECT_EQ(no_cert.exit_code, 3) << no_cert.output;
  const ShellResult plaintext = RunShell(Ddpctl("--timeout 3s jobs get tls-job"));
  EXPECT_EQ(plaintext.exit_code, 3) << plaintext.output;
  // A bad file is a usage error naming it, before any connection.
  const ShellResult bad = RunShell(Ddpctl(absl::StrCat("--tls-ca /no/ca.pem jobs get tls-job")));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(absl::StrContains(bad.output, "--tls-ca=/no/ca.pem: cannot open it")) << bad.output;
}

TEST_F(TlsE2eTest, CoordinatorWithAKeyThatIsNotTheCertificates_ExitsTwoNamingIt) {
  const ShellResult bad = RunShell(absl::StrCat(Runfile("coordinator/coordinator"),
                                        " --port 0 --http-port 0 --data-dir ", dir_, "-bad",
                                        " --tls-cert ", pki_.server_cert, " --tls-key ",
                                        pki_.client_key));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(absl::StrContains(bad.output, "does not belong to the certificate")) << bad.output;
}

}  // namespace
}  // namespace ddp::testing
