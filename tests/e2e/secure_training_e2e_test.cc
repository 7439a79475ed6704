// The demo training job (examples/train_ddp.py, two nodes x two gloo
// workers) with TLS, mTLS and a per-job token on: the coordinator binary with
// --tls-cert/--tls-key/--tls-client-ca and --admin-token-file, the job created
// with the admin token by ddpctl, the agents holding only the job's token.

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/e2e/training_fixture.h"
#include "tests/tls/test_certs.h"

namespace ddp::testing {
namespace {

TEST_F(TrainingE2eTest, TwoNodesOverMtlsWithAJobToken_TrainToCompletion) {
  TestPki pki;
  absl::Status made = MakeTestPki(Path("pki"), "demo-ca", &pki);
  if (!made.ok() && made.message().find("not found") != std::string::npos) {
    GTEST_SKIP() << "no openssl command: " << made;
  }
  ASSERT_TRUE(made.ok()) << made;
  std::ofstream(Path("admin.token")) << "admin-token-of-the-secure-demo\n";
  coordinator_args_ = {"--tls-cert",        pki.server_cert,   "--tls-key",
                       pki.server_key,      "--tls-client-ca", pki.ca_cert,
                       "--admin-token-file", Path("admin.token")};
  StartCoordinator();
  const std::string tls = absl::StrCat(" --tls-ca ", pki.ca_cert, " --tls-cert ",
                                       pki.client_cert, " --tls-key ", pki.client_key);
  const ShellResult created =
      RunShell(absl::StrCat(Runfile("tools/ddpctl/ddpctl"), " --coordinator ",
                            coordinator_->address(), tls, " --token-file ", Path("admin.token"),
                            " jobs create ", kJob, " --nnodes 2 --nproc-per-node 2"));
  ASSERT_EQ(created.exit_code, 0) << created.output;
  const size_t at = created.output.find("token: ");
  ASSERT_NE(at, std::string::npos) << created.output;
  const std::string token = created.output.substr(at + 7, created.output.find('\n', at) - at - 7);
  agent_env_ = {"DDP_TLS_CA=" + pki.ca_cert, "DDP_TLS_CERT=" + pki.client_cert,
                "DDP_TLS_KEY=" + pki.client_key, "DDP_TOKEN=" + token};
  AgentProcess& a = StartAgent("node-a", {"--nnodes", "2"}, Train(8, "0"));
  AgentProcess& b = StartAgent("node-b", {"--nnodes", "2"}, Train(8, "0"));
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  ExpectTrainedTogether(4, 0);
}

}  // namespace
}  // namespace ddp::testing
