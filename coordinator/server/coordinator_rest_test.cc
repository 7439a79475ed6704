// The REST API end to end: a real coordinator (real SQLite, real gRPC, its
// HTTP listener on port 0) driven with an HTTP client. Every route reaches the
// gRPC method (what REST writes gRPC reads back), errors carry grpc-gateway's
// status and JSON body, event streams resume from Last-Event-ID, and the docs
// list exactly the routes of the table.

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "coordinator/http/rest_routes.h"
#include "coordinator/server/coordinator_server.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace ddp::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CoordinatorRestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("TEST_TMPDIR");
    CoordinatorServerOptions options;
    options.data_dir = std::string(dir ? dir : "/tmp") + "/" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name();
    options.bind_address = "127.0.0.1";
    options.port = 0;
    options.http.emplace();
    options.http->port = 0;
    auto server = CoordinatorServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->http_port());
    client_->set_read_timeout(20, 0);
  }

  // Status and body of one request (JSON body, if any).
  std::pair<int, std::string> Call(const std::string& method, const std::string& path,
                                   const std::string& body = "") {
    auto send = [&]() -> httplib::Result {
      if (method == "POST") return client_->Post(path.c_str(), body, "application/json");
      if (method == "PUT") return client_->Put(path.c_str(), body, "application/json");
      if (method == "PATCH") return client_->Patch(path.c_str(), body, "application/json");
      if (method == "DELETE") return client_->Delete(path.c_str());
      return client_->Get(path.c_str());
    };
    httplib::Result result = send();
    if (!result) {
      ADD_FAILURE() << method << " " << path << ": " << httplib::to_string(result.error());
      return {0, ""};
    }
    return {result->status, result->body};
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(CoordinatorRestTest, HealthAndReadiness) {
  EXPECT_EQ(Call("GET", "/healthz"), std::make_pair(200, std::string("ok\n")));
  EXPECT_EQ(Call("GET", "/readyz"), std::make_pair(200, std::string("ready\n")));
}

TEST_F(CoordinatorRestTest, JobLifecycleThroughRest) {
  auto [status, body] =
      Call("POST", "/v1/jobs", R"({"jobId":"train-1","settings":{"minNodes":2,"nprocPerNode":4}})");
  ASSERT_EQ(status, 200) << body;
  EXPECT_THAT(body, HasSubstr(R"("state":"WAITING")"));
  EXPECT_THAT(body, HasSubstr(R"("nprocPerNode":4)"));

  std::tie(status, body) = Call("GET", "/v1/jobs/train-1");
  EXPECT_EQ(status, 200);
  EXPECT_THAT(body, HasSubstr(R"("jobId":"train-1")"));
  std::tie(status, body) = Call("GET", "/v1/jobs?states=WAITING&states=RUNNING");
  EXPECT_THAT(body, HasSubstr("train-1"));
  std::tie(status, body) = Call("GET", "/v1/jobs?states=FAILED");
  EXPECT_THAT(body, Not(HasSubstr("train-1")));

  std::tie(status, body) = Call("PATCH", "/v1/jobs/train-1", R"({"minNodes":1,"maxNodes":3})");
  EXPECT_EQ(status, 200) << body;
  EXPECT_THAT(body, HasSubstr(R"("maxNodes":3)"));

  // A finished job cannot be deleted before it finishes; cancel, then delete.
  std::tie(status, body) = Call("DELETE", "/v1/jobs/train-1");
  EXPECT_EQ(status, 400) << "FAILED_PRECONDITION maps to 400: " << body;
  EXPECT_THAT(body, HasSubstr(R"("code":9)"));
  std::tie(status, body) = Call("POST", "/v1/jobs/train-1:cancel", R"({"reason":"test"})");
  EXPECT_EQ(status, 200) << body;
  EXPECT_THAT(body, HasSubstr(R"("state":"CANCELLED")"));
  std::tie(status, body) = Call("DELETE", "/v1/jobs/train-1");
  EXPECT_EQ(status, 200) << body;
  std::tie(status, body) = Call("GET", "/v1/jobs/train-1");
  EXPECT_EQ(status, 404);
}

TEST_F(CoordinatorRestTest, ErrorsHaveGatewayStatusAndJsonBody) {
  auto [status, body] = Call("GET", "/v1/jobs/nope");
  EXPECT_EQ(status, 404);
  EXPECT_THAT(body, HasSubstr(R"("code":5)"));
  EXPECT_THAT(body, HasSubstr("job 'nope' does not exist"));

  std::tie(status, body) = Call("POST", "/v1/jobs", R"({"jobId":"j","settings":{"minNodez":1}})");
  EXPECT_EQ(status, 400);
  EXPECT_THAT(body, HasSubstr("minNodez"));
  std::tie(status, body) = Call("POST", "/v1/jobs", R"({"jobId":"j","settings":{"minNodes":-1}})");
  EXPECT_EQ(status, 400) << "the gRPC method's validation answers: " << body;
  EXPECT_THAT(body, HasSubstr(R"("code":3)"));
  std::tie(status, body) = Call("POST", "/v1/jobs", "{not json");
  EXPECT_EQ(status, 400);
  ASSERT_EQ(Call("POST", "/v1/jobs", R"({"jobId":"j","settings":{"minNodes":1}})").first, 200);
  std::tie(status, body) = Call("POST", "/v1/jobs", R"({"jobId":"j","settings":{"minNodes":2}})");
  EXPECT_EQ(status, 409) << body;

  std::tie(status, body) = Call("GET", "/v1/kv/ns?limt=3");
  EXPECT_EQ(status, 400);
  EXPECT_THAT(body, HasSubstr("unknown parameter 'limt'"));
  std::tie(status, body) = Call("GET", "/v1/nothing/here");
  EXPECT_EQ(status, 404);
  EXPECT_THAT(body, HasSubstr("no REST route"));
  std::tie(status, body) = Call("PUT", "/v1/jobs/j", "{}");
  EXPECT_EQ(status, 405);
  EXPECT_THAT(body, HasSubstr(R"("code":12)"));
  std::tie(status, body) = Call("GET", "/v1/kv/ns/%zz");
  EXPECT_EQ(status, 404) << "a malformed escape matches no route";
}

TEST_F(CoordinatorRestTest, KeyValueRoutesReachTheSameStoreAsGrpc) {
  // Keys are text in the path: slashes and an escaped ':' are part of the key.
  auto [status, body] = Call("PUT", "/v1/kv/ns/ckpt/step%3A1", R"({"value":"aGVsbG8="})");
  ASSERT_EQ(status, 200) << body;
  auto stub = v1::KeyValueService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::GetRequest get;
  get.set_namespace_("ns");
  get.set_key("ckpt/step:1");
  v1::GetResponse got;
  ASSERT_TRUE(stub->Get(&context, get, &got).ok());
  EXPECT_EQ(got.kv().value(), "hello");

  std::tie(status, body) = Call("GET", "/v1/kv/ns/ckpt/step%3A1");
  EXPECT_THAT(body, HasSubstr(R"("value":"aGVsbG8=")"));
  std::tie(status, body) = Call("GET", "/v1/kv/ns?prefix=ckpt/&keys_only=true");
  EXPECT_THAT(body, HasSubstr(R"("key":"Y2twdC9zdGVwOjE=")"));
  EXPECT_THAT(body, Not(HasSubstr("aGVsbG8=")));

  std::tie(status, body) = Call("POST", "/v1/kv/ns/counter:add", R"({"delta":"5"})");
  EXPECT_THAT(body, HasSubstr(R"("value":"5")"));
  std::tie(status, body) = Call("POST", "/v1/kv/ns/counter:add", R"({"delta":"-2"})");
  EXPECT_THAT(body, HasSubstr(R"("value":"3")"));
  std::tie(status, body) =
      Call("POST", "/v1/kv/ns/leader:compareAndSet", R"({"expected":"","desired":"YQ=="})");
  EXPECT_THAT(body, HasSubstr(R"("swapped":true)"));
  std::tie(status, body) =
      Call("POST", "/v1/kv/ns/leader:compareAndSet", R"({"expected":"","desired":"Yg=="})");
  EXPECT_THAT(body, HasSubstr(R"("swapped":false)"));

  std::tie(status, body) = Call("POST", "/v1/leases", R"({"ttlMs":"60000"})");
  ASSERT_EQ(status, 200) << body;
  v1::LeaseGrantResponse lease;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(body, &lease).ok());
  const std::string id = std::to_string(lease.lease());
  EXPECT_EQ(Call("PUT", "/v1/kv/ns/alive", R"({"value":"eA==","lease":")" + id + "\"}").first, 200);
  EXPECT_EQ(Call("POST", "/v1/leases/" + id + ":keepAlive").first, 200);
  std::tie(status, body) = Call("DELETE", "/v1/leases/" + id);
  EXPECT_THAT(body, HasSubstr(R"("deleted":"1")"));
  EXPECT_EQ(Call("GET", "/v1/kv/ns/alive").first, 404);

  std::tie(status, body) = Call("DELETE", "/v1/kv/ns/ckpt?prefix=true");
  EXPECT_THAT(body, HasSubstr(R"("deleted":"1")"));
  std::tie(status, body) = Call("GET", "/v1/kv:status");
  EXPECT_EQ(status, 200);
  EXPECT_THAT(body, HasSubstr(R"("keys":"2")"));
}

// Reads an event stream until `want` events (lines "id: N") arrived.
std::string ReadEvents(httplib::Client& client, const std::string& path,
                       const httplib::Headers& headers, int want) {
  std::string text;
  int events = 0;
  client.Get(path.c_str(), headers, [&](const char* data, size_t length) {
    text.append(data, length);
    events = 0;
    for (size_t at = text.find("\nid: "); at != std::string::npos;
         at = text.find("\nid: ", at + 1)) {
      ++events;
    }
    if (text.rfind("id: ", 0) == 0) ++events;
    return events < want;
  });
  return text;
}

TEST_F(CoordinatorRestTest, WatchStreamsResumeFromLastEventId) {
  for (const char* key : {"a", "b", "c"}) {
    ASSERT_EQ(Call("PUT", std::string("/v1/kv/w/") + key, R"({"value":"eA=="})").first, 200);
  }
  httplib::Client stream("127.0.0.1", server_->http_port());
  stream.set_read_timeout(20, 0);
  // From revision 2: one event per revision already committed, each with its id.
  std::string text = ReadEvents(stream, "/v1/kv/w:watch?start_revision=2", {}, 1);
  EXPECT_THAT(text, HasSubstr("id: 3"));
  EXPECT_THAT(text, HasSubstr(R"("key":"Yg==")"));
  EXPECT_THAT(text, Not(HasSubstr(R"("key":"YQ==")"))) << "revision 1 is before the start";
  // A reconnect with Last-Event-ID 2 gets revision 3 only, then new writes.
  std::string resumed;
  std::thread reader([&] {
    resumed = ReadEvents(stream, "/v1/kv/w:watch", {{"Last-Event-ID", "2"}}, 2);
  });
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_EQ(Call("PUT", "/v1/kv/w/d", R"({"value":"eA=="})").first, 200);
  reader.join();
  EXPECT_THAT(resumed, HasSubstr(R"("key":"Yw==")"));
  EXPECT_THAT(resumed, HasSubstr(R"("key":"ZA==")"));
  EXPECT_THAT(resumed, Not(HasSubstr(R"("key":"Yg==")")));

  ASSERT_EQ(Call("POST", "/v1/jobs", R"({"jobId":"jw","settings":{"minNodes":1}})").first, 200);
  std::string job_events = ReadEvents(stream, "/v1/jobs/jw:watch?from_index=1", {}, 1);
  EXPECT_THAT(job_events, HasSubstr(R"("type":"JOB_CREATED")"));
  std::string missing = "";
  stream.Get("/v1/jobs/none:watch", [&](const char* data, size_t length) {
    missing.append(data, length);
    return true;
  });
  EXPECT_THAT(missing, HasSubstr("event: error"));
  EXPECT_THAT(missing, HasSubstr(R"("code":5)"));
}

TEST_F(CoordinatorRestTest, TakenHttpPortIsRefusedNotShared) {
  CoordinatorServerOptions second;
  const char* dir = std::getenv("TEST_TMPDIR");
  second.data_dir = std::string(dir ? dir : "/tmp") + "/second";
  second.bind_address = "127.0.0.1";
  second.port = 0;
  second.http.emplace();
  second.http->port = server_->http_port();
  auto started = CoordinatorServer::Start(second);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), absl::StatusCode::kAlreadyExists) << started.status();
  EXPECT_THAT(std::string(started.status().message()), HasSubstr("--http-port"));
  EXPECT_EQ(Call("GET", "/healthz").first, 200) << "the first still serves";
}

TEST(RestRoutesDocTest, ApiDocListsEveryRouteOfTheTable) {
  std::ifstream in("docs/api.md");
  ASSERT_TRUE(in.good()) << "docs/api.md is a data dependency of this test";
  std::stringstream doc;
  doc << in.rdbuf();
  for (const http::RestRoute& route : http::RestRoutes()) {
    EXPECT_THAT(doc.str(), HasSubstr("`" + route.http_method + " " + route.path + "`"))
        << "docs/api.md lacks the route; add it to the REST table";
    EXPECT_THAT(doc.str(), HasSubstr(route.curl_example));
  }
}

}  // namespace
}  // namespace ddp::server
