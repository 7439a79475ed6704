// WatchJob streams over real gRPC whose client never reads: what the server
// holds for them is bounded in bytes (issue 23), and the stream ends with
// RESOURCE_EXHAUSTED naming the index to watch again from.

#include "coordinator/session/grpc_job_watch_reactor.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/session/job_services.h"
#include "coordinator/session/testing/with_own_commit_loop.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

using ::testing::HasSubstr;

class JobWatchReactorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    JobServicesOptions options;
    options.rendezvous.tick_interval = absl::Milliseconds(10);
    options.jobs.watch_buffer_bytes = 16 << 10;
    auto services = StartJobServicesWithLoop(RealClock::Get(), &store_, options);
    ASSERT_TRUE(services.ok()) << services.status();
    services_ = *std::move(services);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    services_->RegisterWith(builder);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    services_->StartSessionQueues();
    // A client that buffers little: no BDP probing, a 4 KiB stream window.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 4096);
    jobs_ = v1::JobService::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args));
    grpc::ClientContext context;
    v1::CreateJobRequest create;
    create.set_job_id("j");
    create.mutable_settings()->set_min_nodes(1);
    create.mutable_settings()->set_max_nodes(2);
    v1::Job job;
    ASSERT_TRUE(jobs_->CreateJob(&context, create, &job).ok());
  }

  void TearDown() override {
    services_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    services_->StopSessionQueues();
  }

  // One JOB_UPDATED event.
  void Update(int i) {
    grpc::ClientContext context;
    v1::UpdateJobRequest update;
    update.set_job_id("j");
    update.set_min_nodes(1);
    update.set_max_nodes(2 + i % 2);
    v1::Job job;
    ASSERT_TRUE(jobs_->UpdateJob(&context, update, &job).ok());
  }

  rendezvous::InMemoryJobStateStore store_;
  JobServicesWithLoop services_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
};

TEST_F(JobWatchReactorTest, ClientNeverReads_StreamEndsResourceExhaustedWithResumeIndex) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::WatchJobRequest request;
  request.set_job_id("j");
  request.set_from_index(1);
  auto reader = jobs_->WatchJob(&context, request);
  v1::JobEvent event;
  ASSERT_TRUE(reader->Read(&event));  // JOB_CREATED: the stream is open
  int64_t last = event.index();
  ASSERT_EQ(last, 1);
  // From now on the client reads nothing while the job changes. The stream gives up once
  // it holds 16 KiB of events (~120 JOB_UPDATED events beyond what the
  // transport holds); without the byte bound the hub cut it off only after
  // 1,024 queued events.
  int updates = 0;
  while (services_->job_watchers() > 0 && updates < 1000) {
    Update(updates++);
  }
  EXPECT_EQ(services_->job_watchers(), 0) << updates << " updates";
  EXPECT_LT(updates, 1000);
  // What was written reaches the client in order, then the status names the
  // next index.
  while (reader->Read(&event)) {
    EXPECT_EQ(event.index(), last + 1);
    last = event.index();
  }
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr(absl::StrCat("from_index=", last + 1)));
  EXPECT_THAT(status.error_message(), HasSubstr("--watch-buffer-bytes"));
  // Watching again from there delivers the rest.
  grpc::ClientContext again;
  again.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  request.set_from_index(last + 1);
  auto resumed = jobs_->WatchJob(&again, request);
  ASSERT_TRUE(resumed->Read(&event));
  EXPECT_EQ(event.index(), last + 1);
  again.TryCancel();
  while (resumed->Read(&event)) {
  }
  resumed->Finish();
}

TEST_F(JobWatchReactorTest, ClientReads_AllEventsDeliveredAcrossCatchUpAndLive) {
  for (int i = 0; i < 40; ++i) Update(i);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::WatchJobRequest request;
  request.set_job_id("j");
  request.set_from_index(1);
  auto reader = jobs_->WatchJob(&context, request);
  v1::JobEvent event;
  int64_t last = 0;
  for (int i = 40; i < 80; ++i) {
    Update(i);
    ASSERT_TRUE(reader->Read(&event));
    EXPECT_EQ(event.index(), last + 1);
    last = event.index();
  }
  while (last < 81 && reader->Read(&event)) {  // created + 80 updates
    EXPECT_EQ(event.index(), last + 1);
    last = event.index();
  }
  EXPECT_EQ(last, 81);
  context.TryCancel();
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace ddp::session
