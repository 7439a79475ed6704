#ifndef DDP_COORDINATOR_SESSION_TESTING_JOB_SERVICES_FIXTURE_H_
#define DDP_COORDINATOR_SESSION_TESTING_JOB_SERVICES_FIXTURE_H_

// Test fixture: JobServices over an in-memory store (or one a test supplies),
// served by a real in-process gRPC server on port 0, plus helpers to make fake
// agents and a JobService stub. Timing is real (short settings: heartbeat 50
// ms, timeout 300 ms), and every wait has a loose deadline.

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/session/job_services.h"
#include "coordinator/session/testing/fake_agent.h"
#include "coordinator/session/testing/with_own_commit_loop.h"
#include "ddp/v1/jobs.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace ddp::session::testing {

// A loose upper bound for anything that should take milliseconds.
inline constexpr absl::Duration kWait = absl::Seconds(10);

inline v1::JobSettings FastSettings(int min_nodes, int max_nodes, int max_restarts = 3,
                                    int nproc = 1) {
  v1::JobSettings s;
  s.set_min_nodes(min_nodes);
  s.set_max_nodes(max_nodes);
  s.set_nproc_per_node(nproc);
  s.set_max_restarts(max_restarts);
  s.set_join_timeout_ms(20000);
  s.set_last_call_timeout_ms(200);
  s.set_heartbeat_interval_ms(50);
  s.set_heartbeat_timeout_ms(300);
  s.set_shutdown_timeout_ms(5000);
  return s;
}

class JobServicesTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(&memory_store_); }
  void TearDown() override { StopServer(); }

  void StartServer(rendezvous::JobStateStore* store) {
    JobServicesOptions options;
    options.rendezvous.tick_interval = absl::Milliseconds(10);
    // The same tests over the async transport: DDP_TEST_SESSION_QUEUES=K.
    if (const char* queues = std::getenv("DDP_TEST_SESSION_QUEUES")) {
      options.session.completion_queues = std::atoi(queues);
    }
    // ... and with queues opening as streams come: DDP_TEST_SESSION_QUEUE_STREAMS=S.
    if (const char* streams = std::getenv("DDP_TEST_SESSION_QUEUE_STREAMS")) {
      options.session.streams_per_completion_queue = std::atoi(streams);
    }
    options.heartbeat_udp = heartbeat_udp_;
    absl::StatusOr<JobServicesWithLoop> services =
        StartJobServicesWithLoop(RealClock::Get(), store, options);
    ASSERT_TRUE(services.ok()) << services.status();
    services_ = std::move(*services);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    services_->RegisterWith(builder);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    services_->StartSessionQueues();
    ASSERT_TRUE(services_->StartHeartbeatUdp("127.0.0.1", 0).ok());
    target_ = "127.0.0.1:" + std::to_string(port);
    jobs_ =
        v1::JobService::NewStub(grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
  }

  void StopServer() {
    agents_.clear();
    if (services_) services_->Shutdown();
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_->Wait();
    }
    if (services_) services_->StopSessionQueues();
    server_.reset();
    services_.reset();
  }

  // An agent of `job` named `node` (not yet registered), owned by the fixture.
  FakeAgent& MakeAgent(const std::string& job, const std::string& node,
                       std::optional<v1::JobSettings> settings, uint64_t incarnation = 1) {
    FakeAgentOptions options;
    options.job_id = job;
    options.node_id = node;
    options.incarnation = incarnation;
    options.settings = std::move(settings);
    if (options.settings) options.nproc = options.settings->nproc_per_node();
    return MakeAgent(std::move(options));
  }
  FakeAgent& MakeAgent(FakeAgentOptions options) {
    agents_.push_back(
        std::make_unique<FakeAgent>(MakeDedicatedChannel(target_), std::move(options)));
    return *agents_.back();
  }

  v1::Job GetJob(const std::string& job_id) {
    grpc::ClientContext context;
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    v1::Job job;
    grpc::Status status = jobs_->GetJob(&context, request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  bool heartbeat_udp_ = false;  // before StartServer: sessions get UDP channels
  rendezvous::InMemoryJobStateStore memory_store_;
  JobServicesWithLoop services_;
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::vector<std::unique_ptr<FakeAgent>> agents_;
};

}  // namespace ddp::session::testing

#endif  // DDP_COORDINATOR_SESSION_TESTING_JOB_SERVICES_FIXTURE_H_
