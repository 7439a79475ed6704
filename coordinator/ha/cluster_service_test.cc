#include "coordinator/ha/cluster_service.h"

#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace ddp::ha {
namespace {

class ClusterServiceTest : public ::testing::Test {
 protected:
  void Serve(ClusterService::Status status, size_t max_pending = 64) {
    service_ = std::make_unique<ClusterService>(std::move(status), nullptr, max_pending);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_GT(port, 0);
    stub_ = v1::ClusterService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                            grpc::InsecureChannelCredentials()));
  }
  grpc::Status Ask(v1::ClusterStatus* reply) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::GetClusterStatusRequest request;
    request.set_etcd_health(true);
    return stub_->GetClusterStatus(&context, request, reply);
  }
  std::unique_ptr<ClusterService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ClusterService::Stub> stub_;
};

TEST_F(ClusterServiceTest, GetClusterStatus_AnsweredOffTheGrpcThreads_WithTheStatus) {
  Serve([](bool etcd_health) {
    v1::ClusterStatus status;
    status.set_store(etcd_health ? "asked etcd" : "not asked");
    return status;
  });
  v1::ClusterStatus reply;
  ASSERT_TRUE(Ask(&reply).ok());
  EXPECT_EQ(reply.store(), "asked etcd");
  server_->Shutdown();
}

// A service whose answers block until `release_`; `entered_` once the first
// call is being answered.
class BlockedClusterServiceTest : public ClusterServiceTest {
 protected:
  void SetUp() override {
    Serve(
        [this](bool) {
          if (!entered_.HasBeenNotified()) entered_.Notify();  // one answering thread
          release_.WaitForNotification();
          return v1::ClusterStatus();
        },
        /*max_pending=*/1);
  }
  absl::Notification entered_, release_;
};

// The service ends no later than its destructor: a call still waiting is
// answered UNAVAILABLE and the answering thread is joined (it used to be a
// detached thread per call that captured `this`).
TEST_F(BlockedClusterServiceTest, Destroyed_WhileACallWaits_AnsweredUnavailable) {
  grpc::Status first, second;
  std::thread a([&] {
    v1::ClusterStatus r;
    first = Ask(&r);
  });
  entered_.WaitForNotification();
  std::thread b([&] {
    v1::ClusterStatus r;
    second = Ask(&r);
  });
  absl::SleepFor(absl::Milliseconds(300));  // the second call is queued by then
  std::thread destroy([&] { service_.reset(); });
  absl::SleepFor(absl::Milliseconds(300));  // the destructor marked the service stopping
  release_.Notify();
  a.join();
  b.join();
  destroy.join();
  EXPECT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(second.error_code(), grpc::StatusCode::UNAVAILABLE) << second.error_message();
  server_->Shutdown();
}

TEST_F(BlockedClusterServiceTest, QueueFull_ResourceExhaustedAtOnce) {
  std::thread a([&] {
    v1::ClusterStatus r;
    (void)Ask(&r);
  });
  entered_.WaitForNotification();
  std::thread b([&] {
    v1::ClusterStatus r;
    (void)Ask(&r);
  });
  absl::SleepFor(absl::Milliseconds(300));  // the second call is queued by then
  v1::ClusterStatus r;
  const grpc::Status third = Ask(&r);
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << third.error_message();
  release_.Notify();
  a.join();
  b.join();
  server_->Shutdown();
}

}  // namespace
}  // namespace ddp::ha
