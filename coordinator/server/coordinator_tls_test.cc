// TLS and mTLS on the coordinator's gRPC port, with certificates made by the
// openssl command line: what a client without the CA, without TLS or without
// a client certificate gets, certificate rotation without a restart, and the
// start-time checks of the files.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_tls.h"
#include "coordinator/server/coordinator_server.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/tls/test_certs.h"

namespace ddp::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CoordinatorTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    absl::Status made = testing::MakeTestPki(dir_ + "-pki", "ca-one", &pki_);
    if (absl::IsUnavailable(made) && made.message().find("not found") != std::string::npos) {
      GTEST_SKIP() << "no openssl command: " << made;
    }
    ASSERT_TRUE(made.ok()) << made;
    options_.data_dir = dir_ + "-data";
    options_.bind_address = "127.0.0.1";
    options_.port = 0;
    options_.tls = TlsServerFiles{pki_.server_cert, pki_.server_key, ""};
    options_.tls_reload_interval = absl::Seconds(1);
  }

  void Start() {
    auto server = CoordinatorServer::Start(options_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // A Put through a fresh channel with `credentials`; its status.
  // `server_name`: the name the client expects in the server's certificate
  // (default: the host dialled).
  grpc::Status Put(const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                   const std::string& host = "127.0.0.1", const std::string& server_name = "") {
    grpc::ChannelArguments args;
    if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
    auto stub = v1::KeyValueService::NewStub(
        grpc::CreateCustomChannel(absl::StrCat(host, ":", server_->port()), credentials, args));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::PutRequest put;
    put.set_namespace_("tls");
    put.set_key("k");
    put.set_value("v");
    v1::PutResponse response;
    return stub->Put(&context, put, &response);
  }

  // curl's HTTP status code of GET `path` on the HTTP listener, with `flags`
  // ("000" when the connection or handshake failed).
  std::string Curl(const std::string& scheme, const std::string& flags,
                   const std::string& path = "/healthz") {
    const std::string command =
        absl::StrCat("curl -s -o /dev/null -w '%{http_code}' --max-time 5 ", flags, " ", scheme,
                     "://127.0.0.1:", server_->http_port(), path, " 2>/dev/null");
    std::string out;
    FILE* pipe = popen(command.c_str(), "r");
    char buffer[64];
    size_t n = 0;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
    pclose(pipe);
    return out;
  }

  std::string dir_;
  testing::TestPki pki_;
  CoordinatorServerOptions options_;
  std::unique_ptr<CoordinatorServer> server_;
};

TEST_F(CoordinatorTlsTest, TlsClientWithTheCaWorks_PlaintextAndOtherCasRefused) {
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_TRUE(Put(GrpcChannelCredentials(TlsClientFiles{pki_.ca_cert, "", ""})).ok());
  EXPECT_TRUE(Put(GrpcChannelCredentials(TlsClientFiles{pki_.ca_cert, "", ""}), "localhost").ok());
  // A certificate for other names does not do.
  const grpc::Status wrong_name = Put(GrpcChannelCredentials(TlsClientFiles{pki_.ca_cert, "", ""}),
                                      "127.0.0.1", "other.example");
  EXPECT_EQ(wrong_name.error_code(), grpc::StatusCode::UNAVAILABLE) << wrong_name.error_message();
  const grpc::Status plaintext = Put(grpc::InsecureChannelCredentials());
  EXPECT_EQ(plaintext.error_code(), grpc::StatusCode::UNAVAILABLE) << plaintext.error_message();
  testing::TestPki other;
  ASSERT_TRUE(testing::MakeTestPki(dir_ + "-other", "ca-other", &other).ok());
  const grpc::Status untrusted = Put(GrpcChannelCredentials(TlsClientFiles{other.ca_cert, "", ""}));
  EXPECT_EQ(untrusted.error_code(), grpc::StatusCode::UNAVAILABLE) << untrusted.error_message();
}

TEST_F(CoordinatorTlsTest, Mtls_ClientCertificateRequired) {
  options_.tls.client_ca = pki_.ca_cert;
  ASSERT_NO_FATAL_FAILURE(Start());
  const grpc::Status without = Put(GrpcChannelCredentials(TlsClientFiles{pki_.ca_cert, "", ""}));
  EXPECT_EQ(without.error_code(), grpc::StatusCode::UNAVAILABLE) << without.error_message();
  EXPECT_TRUE(
      Put(GrpcChannelCredentials(TlsClientFiles{pki_.ca_cert, pki_.client_cert, pki_.client_key}))
          .ok());
  testing::TestPki other;
  ASSERT_TRUE(testing::MakeTestPki(dir_ + "-other", "ca-other", &other).ok());
  // A client certificate that another CA signed.
  const grpc::Status foreign = Put(
      GrpcChannelCredentials(TlsClientFiles{pki_.ca_cert, other.client_cert, other.client_key}));
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::UNAVAILABLE) << foreign.error_message();
}

TEST_F(CoordinatorTlsTest, CertificateReplacedOnDisk_ServedWithoutARestart) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(Put(GrpcChannelCredentials(TlsClientFiles{pki_.ca_cert, "", ""})).ok());
  testing::TestPki next;
  ASSERT_TRUE(testing::MakeTestPki(dir_ + "-next", "ca-next", &next).ok());
  // Rotate: the new pair replaces the old files (rename, as a renewal tool does).
  ASSERT_EQ(rename(next.server_key.c_str(), pki_.server_key.c_str()), 0);
  ASSERT_EQ(rename(next.server_cert.c_str(), pki_.server_cert.c_str()), 0);
  const TlsClientFiles trusts_next{next.ca_cert, "", ""};
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  grpc::Status status = Put(GrpcChannelCredentials(trusts_next));
  while (!status.ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
    status = Put(GrpcChannelCredentials(trusts_next));
  }
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(CoordinatorTlsTest, HttpListener_HttpsWithTheSameFiles_MtlsAndRotation) {
  if (system("curl --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no curl";
  options_.tls.client_ca = pki_.ca_cert;
  options_.http.emplace();
  options_.http->port = 0;
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string client = absl::StrCat("--cacert ", pki_.ca_cert, " --cert ", pki_.client_cert,
                                          " --key ", pki_.client_key);
  EXPECT_EQ(Curl("https", client), "200");
  EXPECT_EQ(Curl("https", "--cacert " + pki_.ca_cert), "000");  // no client certificate
  EXPECT_EQ(Curl("http", ""), "000");                           // plaintext
  testing::TestPki next;
  ASSERT_TRUE(testing::MakeTestPki(dir_ + "-next", "ca-next", &next).ok());
  ASSERT_EQ(rename(next.server_key.c_str(), pki_.server_key.c_str()), 0);
  ASSERT_EQ(rename(next.server_cert.c_str(), pki_.server_cert.c_str()), 0);
  const std::string trusts_next = absl::StrCat("--cacert ", next.ca_cert, " --cert ",
                                               pki_.client_cert, " --key ", pki_.client_key);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::string code = Curl("https", trusts_next);
  while (code != "200" && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
    code = Curl("https", trusts_next);
  }
  EXPECT_EQ(code, "200");
}

TEST_F(CoordinatorTlsTest, BadFiles_RefusedAtStartNamingFlagAndFile) {
  TlsServerFiles mismatched{pki_.server_cert, pki_.client_key, ""};
  absl::Status status = CheckTlsServerFiles(mismatched);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--tls-key=" + pki_.client_key));
  EXPECT_THAT(status.message(), HasSubstr("does not belong to the certificate"));
  status = CheckTlsServerFiles(TlsServerFiles{pki_.server_cert, "", ""});
  EXPECT_THAT(status.message(), HasSubstr("--tls-key is missing"));
  status = CheckTlsServerFiles(TlsServerFiles{"/no/such.crt", pki_.server_key, ""});
  EXPECT_THAT(status.message(), HasSubstr("--tls-cert=/no/such.crt: cannot open it"));
  // A key given as the certificate: named, and the key's contents never echoed.
  status = CheckTlsServerFiles(TlsServerFiles{pki_.server_key, pki_.server_key, ""});
  EXPECT_THAT(status.message(), HasSubstr("no PEM certificate"));
  EXPECT_THAT(status.message(), Not(HasSubstr("PRIVATE KEY")));
  status = CheckTlsClientFiles(TlsClientFiles{"", pki_.client_cert, pki_.client_key});
  EXPECT_THAT(status.message(), HasSubstr("need --tls-ca"));
  options_.tls = mismatched;
  EXPECT_EQ(CoordinatorServer::Start(options_).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ddp::server
