// Authorization through the whole server: every REST route (each one a gRPC
// method behind the gateway, so the gRPC handlers' checks run) x {no
// credentials, another job's token, this job's token, admin}, against the
// rule coordinator/auth gives its method. Only the authorization outcome is
// checked: an allowed call may still fail for other reasons (an empty body,
// an unknown key), never with 401 or 403.

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "coordinator/auth/authorizer.h"
#include "coordinator/http/rest_routes.h"
#include "coordinator/server/coordinator_server.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace ddp::server {
namespace {

constexpr char kAdmin[] = "admin-token-of-the-matrix-test";

class CoordinatorAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    CoordinatorServerOptions options;
    options.data_dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/auth-matrix";
    options.bind_address = "127.0.0.1";
    options.port = 0;
    options.http.emplace();
    options.http->port = 0;
    options.admin_token = kAdmin;
    auto server = CoordinatorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->http_port());
    client_->set_read_timeout(5, 0);
    for (const char* job : {"job-a", "job-b"}) {
      const auto [code, body] =
          Call("POST", "/v1/jobs", kAdmin,
               absl::StrCat(R"({"jobId":")", job, R"(","settings":{"minNodes":1,"maxNodes":1}})"));
      ASSERT_EQ(code, 200) << body;
      const size_t at = body.find(R"("token":")");
      ASSERT_NE(at, std::string::npos) << body;
      const std::string token = body.substr(at + 9, body.find('"', at + 9) - at - 9);
      (std::string(job) == "job-a" ? token_a_ : token_b_) = token;
    }
  }

  std::pair<int, std::string> Call(const std::string& verb, const std::string& path,
                                   const std::string& token, const std::string& body = "{}") {
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    int streamed_status = 0;
    std::string got;  // a GET's body
    auto send = [&]() -> httplib::Result {
      if (verb == "POST") return client_->Post(path, headers, body, "application/json");
      if (verb == "PATCH") return client_->Patch(path, headers, body, "application/json");
      if (verb == "DELETE") return client_->Delete(path, headers);
      if (verb == "PUT") return client_->Put(path, headers, body, "application/json");
      // GET: an event stream that is allowed stays open; its status line does.
      return client_->Get(
          path, headers,
          [&](const httplib::Response& response) {
            streamed_status = response.status;
            return response.status == 200 &&
                   response.get_header_value("Content-Type").find("text/event-stream") ==
                       std::string::npos;
          },
          [&](const char* data, size_t size) {
            got.append(data, size);
            return true;
          });
    };
    httplib::Result result = send();
    if (verb == "GET" && result.error() == httplib::Error::Canceled) return {streamed_status, ""};
    if (!result) return {-1, httplib::to_string(result.error())};
    return {result->status, verb == "GET" ? got : result->body};
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<httplib::Client> client_;
  std::string token_a_;
  std::string token_b_;
};

TEST_F(CoordinatorAuthTest, EveryRouteEveryIdentity) {
  for (const http::RestRoute& route : http::RestRoutes()) {
    const auth::MethodRule* rule = nullptr;
    for (const auth::MethodRule& r : auth::MethodRules()) {
      if (r.method == route.grpc_method) rule = &r;
    }
    ASSERT_NE(rule, nullptr) << route.grpc_method;
    // Every route names job-a (or its key namespace) where it names a job.
    std::string path = absl::StrReplaceAll(
        route.path,
        {{"{job_id}", "job-a"}, {"{namespace}", "job-a"}, {"{key=**}", "k"}, {"{lease}", "1"}});
    if (route.grpc_method == "/ddp.v1.JobService/DeleteJob") continue;  // would remove job-a
    SCOPED_TRACE(route.http_method + " " + path);
    const auto none = Call(route.http_method, path, "");
    EXPECT_EQ(none.first, 401) << none.second;
    const auto wrong = Call(route.http_method, path, "no-such-token-at-all");
    EXPECT_EQ(wrong.first, 401) << wrong.second;
    const auto admin = Call(route.http_method, path, kAdmin);
    EXPECT_NE(admin.first, 401) << admin.second;
    EXPECT_NE(admin.first, 403) << admin.second;
    if (route.grpc_method == "/ddp.v1.JobService/IssueJobToken") {
      // job-a has a new token now; the old one was revoked.
      EXPECT_EQ(Call("GET", "/v1/jobs/job-a", token_a_).first, 401);
      const size_t at = admin.second.find(R"("token":")");
      ASSERT_NE(at, std::string::npos) << admin.second;
      token_a_ = admin.second.substr(at + 9, admin.second.find('"', at + 9) - at - 9);
    }
    const auto own = Call(route.http_method, path, token_a_);
    const auto other = Call(route.http_method, path, token_b_);
    switch (rule->access) {
      case auth::Access::kAdmin:
        EXPECT_EQ(own.first, 403) << own.second;
        EXPECT_EQ(other.first, 403) << other.second;
        break;
      case auth::Access::kJob:
        EXPECT_NE(own.first, 401) << own.second;
        EXPECT_NE(own.first, 403) << own.second;
        EXPECT_EQ(other.first, 403) << other.second;
        break;
      case auth::Access::kAuthenticated:
        for (const auto& result : {own, other}) {
          EXPECT_NE(result.first, 401) << result.second;
          EXPECT_NE(result.first, 403) << result.second;
        }
        break;
    }
  }
}

TEST_F(CoordinatorAuthTest, MetricsNeedTheAdminToken_HealthChecksNone) {
  EXPECT_EQ(Call("GET", "/metrics", "").first, 401);
  EXPECT_EQ(Call("GET", "/metrics", token_a_).first, 403);
  const auto admin = Call("GET", "/metrics", kAdmin);
  EXPECT_EQ(admin.first, 200);
  EXPECT_NE(admin.second.find("ddp_"), std::string::npos);
  EXPECT_EQ(Call("GET", "/healthz", "").first, 200);
  EXPECT_EQ(Call("GET", "/readyz", "").first, 200);
}

// RFC 7235: the scheme is case-insensitive (curl -H 'authorization: BEARER T').
TEST_F(CoordinatorAuthTest, SchemeInAnyCase_Accepted) {
  for (const char* scheme : {"BEARER ", "bearer ", "BeArEr "}) {
    httplib::Headers headers = {{"Authorization", scheme + std::string(kAdmin)}};
    httplib::Result result = client_->Get("/v1/jobs/job-a", headers);
    ASSERT_TRUE(result) << httplib::to_string(result.error());
    EXPECT_EQ(result->status, 200) << scheme << result->body;
  }
}

}  // namespace
}  // namespace ddp::server
