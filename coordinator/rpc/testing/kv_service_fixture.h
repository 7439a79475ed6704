#ifndef DDP_COORDINATOR_RPC_TESTING_KV_SERVICE_FIXTURE_H_
#define DDP_COORDINATOR_RPC_TESTING_KV_SERVICE_FIXTURE_H_

// Test fixture: GrpcKvService over a KvStore on InMemoryKvBackend (a fake
// clock, no ticker: a test calls Tick), served by a real in-process gRPC
// server on a free loopback port (Watch on stream queues of its own, as in
// the coordinator), and a stub to call it. A test's SetUp calls
// Serve with the service options (and watcher bounds) it wants.

#include <chrono>
#include <memory>
#include <string>

#include "common/clock.h"
#include "coordinator/commit/testing/kv_store_with_loop.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/rpc/async_stream_queues.h"
#include "coordinator/rpc/grpc_kv_service.h"
#include "coordinator/storage/memory_kv_backend.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace ddp::rpc::testing {

class KvServiceFixture : public ::testing::Test {
 protected:
  void Serve(GrpcKvServiceOptions options, kv::WatchHubOptions watch = kv::WatchHubOptions()) {
    kv::KvStoreOptions store_options;
    store_options.watch = watch;
    auto store = commit::KvStoreWithLoop::Open(std::make_unique<kv::InMemoryKvBackend>(), clock_,
                                               store_options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    service_ = std::make_unique<GrpcKvService>(*store_, std::move(options));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    queues_ = std::make_unique<AsyncStreamQueues>();
    service_->RegisterWith(builder, *queues_);
    queues_->RegisterWith(builder);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    queues_->Start();
    stub_ = v1::KeyValueService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                             grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (store_) store_->Shutdown();
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
      server_->Wait();
    }
    if (queues_ != nullptr) queues_->Stop();
  }

  FakeClock clock_;
  commit::KvStoreWithLoop store_;
  std::unique_ptr<GrpcKvService> service_;
  std::unique_ptr<AsyncStreamQueues> queues_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::KeyValueService::Stub> stub_;
};

}  // namespace ddp::rpc::testing

#endif  // DDP_COORDINATOR_RPC_TESTING_KV_SERVICE_FIXTURE_H_
