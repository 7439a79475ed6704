// The composition root over real gRPC on port 0 with a real data dir: restart
// keeps data and revision, a second server on the same data dir is refused,
// shutdown ends watches.

#include "coordinator/server/coordinator_server.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ddp/v1/jobs.grpc.pb.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace ddp::server {
namespace {

using ::testing::HasSubstr;

class CoordinatorServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("TEST_TMPDIR");
    options_.data_dir = std::string(dir ? dir : "/tmp") + "/" +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    options_.bind_address = "127.0.0.1";
    options_.port = 0;
  }

  std::unique_ptr<CoordinatorServer> MustStart() {
    auto server = CoordinatorServer::Start(options_);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  static std::unique_ptr<v1::KeyValueService::Stub> Connect(const CoordinatorServer& server) {
    return v1::KeyValueService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server.port()), grpc::InsecureChannelCredentials()));
  }

  static std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return context;
  }

  CoordinatorServerOptions options_;
};

TEST_F(CoordinatorServerTest, Restart_SameDataDir_KeepsKeysAndRevision) {
  {
    auto server = MustStart();
    ASSERT_NE(server, nullptr);
    EXPECT_GT(server->port(), 0);
    auto stub = Connect(*server);
    v1::PutRequest put;
    put.set_namespace_("job");
    put.set_key("k");
    for (const char* value : {"1", "2", "3"}) {
      put.set_value(value);
      v1::PutResponse response;
      ASSERT_TRUE(stub->Put(Context().get(), put, &response).ok());
    }
    server->Shutdown();
  }
  auto server = MustStart();
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);
  v1::GetRequest get;
  get.set_namespace_("job");
  get.set_key("k");
  v1::GetResponse got;
  ASSERT_TRUE(stub->Get(Context().get(), get, &got).ok());
  EXPECT_EQ(got.kv().value(), "3");
  EXPECT_EQ(got.kv().version(), 3);
  EXPECT_EQ(got.revision(), 3);
  v1::StatusResponse status;
  ASSERT_TRUE(stub->Status(Context().get(), v1::StatusRequest(), &status).ok());
  EXPECT_EQ(status.revision(), 3);
  EXPECT_EQ(status.keys(), 1);
}

TEST_F(CoordinatorServerTest, Start_DataDirInUse_FailedPreconditionNamingDirAndPid) {
  auto first = MustStart();
  ASSERT_NE(first, nullptr);
  auto second = CoordinatorServer::Start(options_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(options_.data_dir));
  EXPECT_THAT(second.status().message(), HasSubstr(std::to_string(getpid())));
  first->Shutdown();
  EXPECT_NE(MustStart(), nullptr);  // the lock is released on shutdown
}

TEST_F(CoordinatorServerTest, Shutdown_OpenWatch_StreamEndsUnavailable) {
  auto server = MustStart();
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);
  v1::WatchRequest request;
  request.set_namespace_("job");
  auto context = Context();
  auto reader = stub->Watch(context.get(), request);
  v1::WatchResponse response;
  ASSERT_TRUE(reader->Read(&response));
  server->Shutdown();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

// A client that keeps its connection alive with an HTTP/2 ping a second and
// no data (an idle watch) is not taken for an abuser (gRPC's default would
// close the connection with too_many_pings after a few).
TEST_F(CoordinatorServerTest, KeepalivePingsEverySecond_IdleStreamStaysOpen) {
  auto server = MustStart();
  ASSERT_NE(server, nullptr);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  auto pinging = v1::KeyValueService::NewStub(grpc::CreateCustomChannel(
      "127.0.0.1:" + std::to_string(server->port()), grpc::InsecureChannelCredentials(), args));
  v1::WatchRequest request;
  request.set_namespace_("job");
  auto context = Context();
  auto reader = pinging->Watch(context.get(), request);
  v1::WatchResponse response;
  ASSERT_TRUE(reader->Read(&response));
  absl::SleepFor(absl::Seconds(5));  // about five pings, no data
  auto writer = Connect(*server);
  v1::PutRequest put;
  put.set_namespace_("job");
  put.set_key("k");
  put.set_value("v");
  v1::PutResponse put_response;
  ASSERT_TRUE(writer->Put(Context().get(), put, &put_response).ok());
  ASSERT_TRUE(reader->Read(&response)) << reader->Finish().error_message();
  context->TryCancel();
}

TEST_F(CoordinatorServerTest, Start_BadPort_InvalidArgument) {
  options_.port = 70000;
  EXPECT_EQ(CoordinatorServer::Start(options_).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorServerTest, JobService_CreatedJob_SurvivesRestart) {
  int64_t created_unix_ms = 0;
  {
    auto server = MustStart();
    ASSERT_NE(server, nullptr);
    auto jobs = v1::JobService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server->port()), grpc::InsecureChannelCredentials()));
    v1::CreateJobRequest request;
    request.set_job_id("train-42");
    request.mutable_settings()->set_min_nodes(2);
    request.mutable_settings()->set_max_nodes(4);
    request.mutable_settings()->set_nproc_per_node(8);
    request.mutable_settings()->set_max_restarts(5);
    v1::Job created;
    const grpc::Status status = jobs->CreateJob(Context().get(), request, &created);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(created.state(), v1::WAITING);
    created_unix_ms = created.created_unix_ms();
    // Loose: set from the coordinator's clock when the job was created.
    EXPECT_LE(std::abs(created_unix_ms - absl::ToUnixMillis(absl::Now())), 60000);
  }
  auto server = MustStart();
  ASSERT_NE(server, nullptr);
  auto jobs = v1::JobService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server->port()), grpc::InsecureChannelCredentials()));
  v1::GetJobRequest get;
  get.set_job_id("train-42");
  v1::Job job;
  const grpc::Status status = jobs->GetJob(Context().get(), get, &job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(job.settings().min_nodes(), 2);
  EXPECT_EQ(job.settings().max_nodes(), 4);
  EXPECT_EQ(job.settings().nproc_per_node(), 8);
  EXPECT_EQ(job.settings().max_restarts(), 5);
  EXPECT_EQ(job.state(), v1::WAITING);
  EXPECT_EQ(job.created_unix_ms(), created_unix_ms);
}

TEST_F(CoordinatorServerTest, JobService_UnknownJob_NotFound) {
  auto server = MustStart();
  ASSERT_NE(server, nullptr);
  auto jobs = v1::JobService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server->port()), grpc::InsecureChannelCredentials()));
  v1::GetJobRequest get;
  get.set_job_id("nope");
  v1::Job job;
  const grpc::Status status = jobs->GetJob(Context().get(), get, &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("nope"));
}

}  // namespace
}  // namespace ddp::server
