// A real coordinator with authorization (issue 23, point 3): streams opened
// with job A's token (a gRPC Watch, a gRPC WatchJob, and both as event
// streams over HTTP) must end within a second of `ddpctl jobs token A`
// (IssueJobToken) rotating A's token: gRPC with UNAUTHENTICATED, event
// streams with an error event, then closed. Before, they kept delivering A's
// events.

#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "coordinator/http/testing/raw_http.h"
#include "ddp/v1/jobs.grpc.pb.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"
#include "tests/hardening/http_coordinator.h"

namespace ddp::testing {
namespace {

using http::testing::Call;
using http::testing::ReadFor;
using http::testing::SendRequest;
using ::testing::HasSubstr;

constexpr char kAdmin[] = "admin-token-of-the-revocation-test";

// The admin's POST of `body` to `path`; the token its reply names ("" if none).
std::string PostForToken(int port, const std::string& path, const std::string& body) {
  const std::string reply =
      Call(port, "POST", path, "127.0.0.1", kAdmin, body, absl::Seconds(10)).body;
  const size_t at = reply.find("\"token\":\"");
  if (at == std::string::npos) return "";
  return reply.substr(at + 9, reply.find('"', at + 9) - at - 9);
}

TEST(RevokedTokenStreamTest, TokenRotated_OpenStreamsEndWithinASecond) {
  CoordinatorProcessOptions options = HttpCoordinatorOptions();
  const std::string admin_file = options.work_dir + "/admin.token";
  std::ofstream(admin_file) << kAdmin << "\n";
  options.extra_args.insert(options.extra_args.end(), {"--admin-token-file", admin_file});
  CoordinatorProcess coordinator(options);
  const absl::StatusOr<int> http_port = StartWithHttp(coordinator, options);
  ASSERT_TRUE(http_port.ok()) << http_port.status();
  const int http = *http_port;

  const std::string token =
      PostForToken(http, "/v1/jobs", R"({"jobId":"a","settings":{"minNodes":1,"maxNodes":1}})");
  ASSERT_FALSE(token.empty());

  // gRPC streams with A's token (sent as metadata: plaintext on loopback).
  auto channel = grpc::CreateChannel(coordinator.address(), grpc::InsecureChannelCredentials());
  auto kv = v1::KeyValueService::NewStub(channel);
  auto jobs = v1::JobService::NewStub(channel);
  grpc::ClientContext watch_context, job_context;
  for (grpc::ClientContext* context : {&watch_context, &job_context}) {
    context->AddMetadata("authorization", "Bearer " + token);
    // Streams that are never ended fail the test instead of hanging it.
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(15));
  }
  v1::WatchRequest watch;
  watch.set_namespace_("a");
  auto kv_reader = kv->Watch(&watch_context, watch);
  v1::WatchResponse kv_message;
  ASSERT_TRUE(kv_reader->Read(&kv_message));
  v1::WatchJobRequest watch_job;
  watch_job.set_job_id("a");
  watch_job.set_from_index(1);
  auto job_reader = jobs->WatchJob(&job_context, watch_job);
  v1::JobEvent job_event;
  ASSERT_TRUE(job_reader->Read(&job_event));
  // The same as event streams.
  const int kv_stream = SendRequest(http, "GET", "/v1/kv/a:watch", "127.0.0.1", token);
  const int job_stream =
      SendRequest(http, "GET", "/v1/jobs/a:watch?from_index=1", "127.0.0.1", token);
  ASSERT_THAT(ReadFor(kv_stream, absl::Seconds(5), "data:"), HasSubstr("200 OK"));
  ASSERT_THAT(ReadFor(job_stream, absl::Seconds(5), "data:"), HasSubstr("200 OK"));

  // Every stream is read on its own thread from now on.
  grpc::Status kv_status, job_status;
  absl::Time kv_end, job_end;
  std::string kv_rest, job_rest;
  std::thread kv_thread([&] {
    while (kv_reader->Read(&kv_message)) {
    }
    kv_status = kv_reader->Finish();
    kv_end = absl::Now();
  });
  std::thread job_thread([&] {
    while (job_reader->Read(&job_event)) {
    }
    job_status = job_reader->Finish();
    job_end = absl::Now();
  });
  absl::Time kv_stream_end, job_stream_end;
  std::thread kv_stream_thread([&] {
    kv_rest = ReadFor(kv_stream, absl::Seconds(10), "event: error");
    kv_stream_end = absl::Now();
  });
  std::thread job_stream_thread([&] {
    job_rest = ReadFor(job_stream, absl::Seconds(10), "event: error");
    job_stream_end = absl::Now();
  });

  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time rotated = absl::Now();
  const std::string new_token = PostForToken(http, "/v1/jobs/a:token", "{}");
  ASSERT_FALSE(new_token.empty());
  ASSERT_NE(new_token, token);

  kv_thread.join();
  job_thread.join();
  kv_stream_thread.join();
  job_stream_thread.join();
  EXPECT_EQ(kv_status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << kv_status.error_message();
  EXPECT_EQ(job_status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << job_status.error_message();
  EXPECT_LT(kv_end - rotated, absl::Seconds(1));
  EXPECT_LT(job_end - rotated, absl::Seconds(1));
  for (const std::string& rest : {kv_rest, job_rest}) {
    EXPECT_THAT(rest, HasSubstr("event: error"));
    EXPECT_THAT(rest, HasSubstr("\"code\":16"));
  }
  EXPECT_LT(kv_stream_end - rotated, absl::Seconds(1));
  EXPECT_LT(job_stream_end - rotated, absl::Seconds(1));
  // The stream is over: nothing more comes, the reply ends.
  EXPECT_THAT(ReadFor(kv_stream, absl::Seconds(2)), ::testing::Not(HasSubstr("data:")));
  close(kv_stream);
  close(job_stream);
  EXPECT_EQ(coordinator.Terminate(), 0);
}

}  // namespace
}  // namespace ddp::testing
