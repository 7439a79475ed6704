// GrpcSessionClient against an in-process fake SessionService on port 0.

#include "client/agent/grpc_session_client.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "ddp/v1/session.grpc.pb.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);  // loose upper bound

// What the fake does with the N-th stream.
enum class Plan {
  kServe,         // Registered, then record messages until cancelled
  kBreak,         // Registered, then end the stream with UNAVAILABLE
  kAbort,         // Registered, then end the stream with ABORTED
  kRefuse,        // FAILED_PRECONDITION instead of Registered
  kPushAndServe,  // Registered + one StopWorkers, then like kServe
  kRefuseLater,   // Registered, then end with FAILED_PRECONDITION
  kSilent,        // never answers Register (until the client cancels)
  kServeAndAck,   // like kServe, acknowledging every heartbeat (running generation 7)
};

class FakeSessionService final : public v1::SessionService::Service {
 public:
  explicit FakeSessionService(std::vector<Plan> plans) : plans_(std::move(plans)) {}

  grpc::Status Session(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::AgentMessage>* stream) override {
    v1::AgentMessage first;
    if (!stream->Read(&first)) return grpc::Status::CANCELLED;
    Plan plan;
    {
      absl::MutexLock lock(&mu_);
      registers_.push_back(first.register_());
      size_t n = registers_.size() - 1;
      plan = n < plans_.size() ? plans_[n] : Plan::kServe;
      contexts_.push_back(context);
    }
    if (plan == Plan::kSilent) {
      v1::AgentMessage ignored;
      while (stream->Read(&ignored)) {
      }
      return grpc::Status::CANCELLED;
    }
    if (plan == Plan::kRefuse) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "job 'j' already finished");
    }
    v1::CoordinatorMessage registered;
    registered.mutable_registered()->set_generation(7);
    registered.mutable_registered()->mutable_settings()->set_heartbeat_interval_ms(20);
    registered.mutable_registered()->set_lease_ms(2000);
    registered.mutable_registered()->set_lease_kill_ms(2500);
    stream->Write(registered);
    if (plan == Plan::kBreak) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
    }
    if (plan == Plan::kRefuseLater) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "no stop of generation 7 was requested");
    }
    if (plan == Plan::kAbort) {
      return grpc::Status(grpc::StatusCode::ABORTED, "incarnation replaced");
    }
    if (plan == Plan::kPushAndServe) {
      v1::CoordinatorMessage stop;
      stop.mutable_stop_workers()->set_generation(7);
      stream->Write(stop);
    }
    v1::AgentMessage message;
    while (stream->Read(&message)) {
      if (plan == Plan::kServeAndAck && message.has_heartbeat()) {
        v1::CoordinatorMessage ack;
        ack.mutable_heartbeat_ack()->set_sequence(message.heartbeat().sequence());
        ack.mutable_heartbeat_ack()->set_running_generation(7);
        stream->Write(ack);
      }
      absl::MutexLock lock(&mu_);
      received_.push_back(message);
    }
    absl::MutexLock lock(&mu_);
    for (auto& c : contexts_) {
      if (c == context) c = nullptr;
    }
    return grpc::Status::OK;
  }

  std::vector<v1::Register> registers() {
    absl::MutexLock lock(&mu_);
    return registers_;
  }
  bool WaitForRegisters(size_t n) {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return registers_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&ready), kWait);
  }
  // Waits for a received message matching `pred`.
  std::optional<v1::AgentMessage> WaitForMessage(
      const std::function<bool(const v1::AgentMessage&)>& pred) {
    absl::MutexLock lock(&mu_);
    std::optional<v1::AgentMessage> found;
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& m : received_) {
        if (pred(m)) {
          found = m;
          return true;
        }
      }
      return false;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), kWait);
    return found;
  }
  // Received messages matching `pred`.
  int CountMessages(const std::function<bool(const v1::AgentMessage&)>& pred) {
    absl::MutexLock lock(&mu_);
    int count = 0;
    for (const auto& m : received_) count += pred(m) ? 1 : 0;
    return count;
  }
  // Breaks the latest live stream from the server side.
  void CancelLatest() {
    absl::MutexLock lock(&mu_);
    for (auto it = contexts_.rbegin(); it != contexts_.rend(); ++it) {
      if (*it != nullptr) {
        (*it)->TryCancel();
        return;
      }
    }
  }

 private:
  const std::vector<Plan> plans_;
  absl::Mutex mu_;
  std::vector<v1::Register> registers_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::AgentMessage> received_ ABSL_GUARDED_BY(mu_);
  std::vector<grpc::ServerContext*> contexts_ ABSL_GUARDED_BY(mu_);
};

class FakeEvents : public SessionEvents {
 public:
  void OnRegistered(const v1::Registered& registered, bool reconnected) override {
    absl::MutexLock lock(&mu_);
    reconnected_.push_back(reconnected);
  }
  void OnCoordinatorMessage(const v1::CoordinatorMessage& message) override {
    absl::MutexLock lock(&mu_);
    messages_.push_back(message);
  }
  void OnFenced(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    ++fenced_;
  }
  void OnSessionFailed(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    failure_ = status;
  }
  std::vector<v1::WorkerState> WorkerStates() override {
    v1::WorkerState state;
    state.set_local_rank(0);
    state.set_state(v1::WORKER_RUNNING);
    return {state};
  }
  void OnLeaseGranted(absl::Duration lease) override {
    absl::MutexLock lock(&mu_);
    lease_ = lease;
  }
  void OnLeaseRenewed(absl::Time sent_at, int64_t running_generation) override {
    absl::MutexLock lock(&mu_);
    renewals_.emplace_back(sent_at, running_generation);
  }
  std::vector<std::pair<absl::Time, int64_t>> WaitForRenewals(size_t n) {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return renewals_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), kWait);
    return renewals_;
  }
  absl::Duration granted() {
    absl::MutexLock lock(&mu_);
    return lease_;
  }

  std::optional<absl::Status> WaitForFailure() {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return failure_.has_value(); };
    mu_.AwaitWithTimeout(absl::Condition(&ready), kWait);
    return failure_;
  }
  bool WaitForRegistrations(size_t n) {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reconnected_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&ready), kWait);
  }
  std::vector<bool> reconnected() {
    absl::MutexLock lock(&mu_);
    return reconnected_;
  }
  int fenced() {
    absl::MutexLock lock(&mu_);
    return fenced_;
  }
  std::vector<v1::CoordinatorMessage> messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }

 private:
  absl::Mutex mu_;
  std::vector<bool> reconnected_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::CoordinatorMessage> messages_ ABSL_GUARDED_BY(mu_);
  int fenced_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Status> failure_ ABSL_GUARDED_BY(mu_);
  absl::Duration lease_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<absl::Time, int64_t>> renewals_ ABSL_GUARDED_BY(mu_);
};

class GrpcSessionClientTest : public ::testing::Test {
 protected:
  void StartServer(std::vector<Plan> plans) {
    service_ = std::make_unique<FakeSessionService>(std::move(plans));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    target_ = absl::StrCat("127.0.0.1:", port);
  }

  void StartClient(uint64_t incarnation = 42,
                   absl::Duration connect_timeout = absl::Milliseconds(500)) {
    SessionClientOptions options;
    options.target = target_;
    options.registration.set_job_id("j");
    options.registration.set_node_id("node-a");
    options.registration.set_nproc(2);
    options.connect_timeout = connect_timeout;
    options.resume_timeout = absl::Seconds(5);
    options.attempt_timeout = absl::Milliseconds(200);
    options.backoff = {absl::Milliseconds(10), absl::Milliseconds(50), 2.0};
    options.close_grace = absl::Milliseconds(200);
    client_ = std::make_unique<GrpcSessionClient>(options, &events_, incarnation);
    client_->Start();
  }

  void TearDown() override {
    if (client_) client_->Close();
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }

  FakeEvents events_;
  std::unique_ptr<FakeSessionService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string target_;
  std::unique_ptr<GrpcSessionClient> client_;
};

TEST_F(GrpcSessionClientTest, Start_Registers_HeartbeatsCarryHeader) {
  StartServer({Plan::kServe});
  StartClient(42);
  client_->SetGeneration(3);
  ASSERT_TRUE(events_.WaitForRegistrations(1));
  EXPECT_EQ(events_.reconnected(), std::vector<bool>{false});
  auto reg = service_->registers();
  ASSERT_EQ(reg.size(), 1u);
  EXPECT_EQ(reg[0].job_id(), "j");
  EXPECT_EQ(reg[0].node_id(), "node-a");
  EXPECT_EQ(reg[0].incarnation(), 42u);
  auto heartbeat =
      service_->WaitForMessage([](const v1::AgentMessage& m) { return m.has_heartbeat(); });
  ASSERT_TRUE(heartbeat.has_value());
  EXPECT_EQ(heartbeat->heartbeat().header().job_id(), "j");
  EXPECT_EQ(heartbeat->heartbeat().header().node_id(), "node-a");
  EXPECT_EQ(heartbeat->heartbeat().header().incarnation(), 42u);
  EXPECT_EQ(heartbeat->heartbeat().header().generation(), 3);
  ASSERT_EQ(heartbeat->heartbeat().workers_size(), 1);
  EXPECT_EQ(heartbeat->heartbeat().workers(0).state(), v1::WORKER_RUNNING);
}

// Worker states travel only when they changed (or on a new stream), and only
// the heartbeats whose acknowledgement renews a lease due for it ask for one.
TEST_F(GrpcSessionClientTest, Heartbeats_StatesOnlyWhenChanged_AcksOnlyWhenDue) {
  StartServer({Plan::kServeAndAck, Plan::kServeAndAck});
  StartClient(42);
  ASSERT_TRUE(events_.WaitForRegistrations(1));
  auto with_states = [](const v1::AgentMessage& m) {
    return m.has_heartbeat() && m.heartbeat().workers_size() > 0;
  };
  auto without_states = [](const v1::AgentMessage& m) {
    return m.has_heartbeat() && m.heartbeat().workers_size() == 0;
  };
  ASSERT_TRUE(service_->WaitForMessage(without_states).has_value());
  EXPECT_EQ(service_->CountMessages(with_states), 1);
  EXPECT_TRUE(service_
                  ->WaitForMessage([](const v1::AgentMessage& m) {
                    return m.has_heartbeat() && m.heartbeat().sequence() == 0;
                  })
                  .has_value());
  EXPECT_GT(service_->CountMessages([](const v1::AgentMessage& m) {
    return m.has_heartbeat() && m.heartbeat().sequence() != 0;
  }),
            0);
  service_->CancelLatest();  // a new stream gets the states again
  ASSERT_TRUE(events_.WaitForRegistrations(2));
  const absl::Time deadline = absl::Now() + kWait;
  while (service_->CountMessages(with_states) < 2 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(service_->CountMessages(with_states), 2);
}

// A new generation gets the worker states again even when they did not change
// (the coordinator keeps them per generation; in-process survivors keep
// theirs across it).
TEST_F(GrpcSessionClientTest, Heartbeats_NewGeneration_StatesAgainUnchanged) {
  StartServer({Plan::kServe});
  StartClient(42);
  client_->SetGeneration(3);
  ASSERT_TRUE(events_.WaitForRegistrations(1));
  auto with_states_of = [](int64_t generation) {
    return [generation](const v1::AgentMessage& m) {
      return m.has_heartbeat() && m.heartbeat().workers_size() > 0 &&
             m.heartbeat().header().generation() == generation;
    };
  };
  ASSERT_TRUE(service_->WaitForMessage(with_states_of(3)).has_value());
  client_->SetGeneration(4);
  ASSERT_TRUE(service_->WaitForMessage(with_states_of(4)).has_value());
  // Then not again while nothing changes.
  ASSERT_TRUE(service_
                  ->WaitForMessage([](const v1::AgentMessage& m) {
                    return m.has_heartbeat() && m.heartbeat().workers_size() == 0 &&
                           m.heartbeat().header().generation() == 4;
                  })
                  .has_value());
  EXPECT_EQ(service_->CountMessages([](const v1::AgentMessage& m) {
    return m.has_heartbeat() && m.heartbeat().workers_size() > 0;
  }),
            2);
}

TEST_F(GrpcSessionClientTest, Send_StampsIdentityKeepsGeneration) {
  StartServer({Plan::kServe});
  StartClient(42);
  ASSERT_TRUE(events_.WaitForRegistrations(1));
  v1::AgentMessage message;
  message.mutable_worker_exited()->mutable_header()->set_generation(9);
  message.mutable_worker_exited()->set_exit_code(5);
  client_->Send(message);
  auto got =
      service_->WaitForMessage([](const v1::AgentMessage& m) { return m.has_worker_exited(); });
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->worker_exited().header().incarnation(), 42u);
  EXPECT_EQ(got->worker_exited().header().node_id(), "node-a");
  EXPECT_EQ(got->worker_exited().header().generation(), 9);
  EXPECT_EQ(got->worker_exited().exit_code(), 5);
}

TEST_F(GrpcSessionClientTest, PushedMessage_DeliveredInOrder) {
  StartServer({Plan::kPushAndServe});
  StartClient();
  ASSERT_TRUE(events_.WaitForRegistrations(1));
  absl::Time deadline = absl::Now() + kWait;
  while (events_.messages().empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(events_.messages().size(), 1u);
  EXPECT_EQ(events_.messages()[0].stop_workers().generation(), 7);
}

TEST_F(GrpcSessionClientTest, StreamBreaks_ResumesWithSameIncarnation) {
  StartServer({Plan::kBreak, Plan::kServe});
  StartClient(42);
  client_->SetGeneration(5);
  ASSERT_TRUE(events_.WaitForRegistrations(2));
  EXPECT_EQ(events_.reconnected(), (std::vector<bool>{false, true}));
  auto reg = service_->registers();
  ASSERT_EQ(reg.size(), 2u);
  EXPECT_EQ(reg[1].incarnation(), 42u);
  EXPECT_EQ(reg[1].generation(), 5);
  EXPECT_EQ(events_.fenced(), 0);
}

TEST_F(GrpcSessionClientTest, LiveStreamRefused_ResumesInsteadOfFailing) {
  StartServer({Plan::kRefuseLater, Plan::kServe});
  StartClient(42);
  ASSERT_TRUE(events_.WaitForRegistrations(2));
  EXPECT_EQ(events_.reconnected(), (std::vector<bool>{false, true}));
  EXPECT_EQ(service_->registers()[1].incarnation(), 42u);
}

TEST_F(GrpcSessionClientTest, StreamKeepsEnding_ResumesWithGrowingDelay) {
  StartServer({Plan::kBreak, Plan::kBreak, Plan::kBreak, Plan::kBreak, Plan::kServe});
  const absl::Time start = absl::Now();
  StartClient(42);
  ASSERT_TRUE(events_.WaitForRegistrations(5));
  // Delays at the top of the jitter would be 10+20+40+50 ms; at the bottom
  // 4 x 10 ms. Without backoff the five registrations take ~1 ms each.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(40));
  for (const v1::Register& r : service_->registers()) {
    EXPECT_EQ(r.incarnation(), 42u);
  }
}

TEST_F(GrpcSessionClientTest, SilentServer_AttemptCancelledThenRetried) {
  StartServer({Plan::kSilent, Plan::kServe});
  // attempt_timeout 200 ms, checked every 500 ms (the default interval).
  StartClient(42, absl::Seconds(5));
  ASSERT_TRUE(events_.WaitForRegistrations(1));
  EXPECT_EQ(service_->registers().size(), 2u);
  EXPECT_EQ(events_.reconnected(), std::vector<bool>{false});
}

TEST_F(GrpcSessionClientTest, ServerCancelsStream_Resumes) {
  StartServer({Plan::kServe, Plan::kServe});
  StartClient(42);
  ASSERT_TRUE(service_->WaitForRegisters(1));
  ASSERT_TRUE(events_.WaitForRegistrations(1));
  service_->CancelLatest();
  ASSERT_TRUE(events_.WaitForRegistrations(2));
  EXPECT_EQ(service_->registers()[1].incarnation(), 42u);
  EXPECT_EQ(client_->registrations(), 2);
}

TEST_F(GrpcSessionClientTest, Aborted_FencedThenNewIncarnationGenerationZero) {
  StartServer({Plan::kAbort, Plan::kServe});
  StartClient(42);
  client_->SetGeneration(5);
  ASSERT_TRUE(events_.WaitForRegistrations(2));
  EXPECT_EQ(events_.fenced(), 1);
  EXPECT_EQ(events_.reconnected(), (std::vector<bool>{false, false}));
  auto reg = service_->registers();
  ASSERT_EQ(reg.size(), 2u);
  EXPECT_NE(reg[1].incarnation(), 42u);
  EXPECT_NE(reg[1].incarnation(), 0u);
  EXPECT_EQ(reg[1].generation(), 0);
  EXPECT_EQ(client_->incarnation(), reg[1].incarnation());
}

TEST_F(GrpcSessionClientTest, Refused_SessionFailedWithoutRetry) {
  StartServer({Plan::kRefuse, Plan::kServe});
  StartClient();
  std::optional<absl::Status> failure = events_.WaitForFailure();
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(service_->registers().size(), 1u);
}

TEST_F(GrpcSessionClientTest, Unreachable_SessionFailedNamingAddress) {
  // A port that was just free: nothing listens there.
  StartServer({});
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  const absl::Time start = absl::Now();
  StartClient();
  std::optional<absl::Status> failure = events_.WaitForFailure();
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(failure->message().find(target_), std::string::npos) << failure->message();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(GrpcSessionClientTest, Close_WhileConnecting_ReturnsPromptly) {
  StartServer({});
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  StartClient();
  const absl::Time start = absl::Now();
  client_->Close();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(GrpcSessionClient, NewIncarnation_NonZeroAndVaries) {
  uint64_t a = GrpcSessionClient::NewIncarnation();
  uint64_t b = GrpcSessionClient::NewIncarnation();
  EXPECT_NE(a, 0u);
  EXPECT_NE(b, 0u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace ddp::client

namespace ddp::client {
namespace {

TEST_F(GrpcSessionClientTest, Acks_RenewTheLeaseFromEachHeartbeatsSendTime) {
  StartServer({Plan::kServeAndAck});
  const absl::Time started = MonotonicClock::Get().Now();
  StartClient(42);
  ASSERT_TRUE(events_.WaitForRegistrations(1));
  EXPECT_EQ(events_.granted(), absl::Milliseconds(2000));
  // The Registered (from the Register's send time), then acks of heartbeats.
  const auto renewals = events_.WaitForRenewals(4);
  ASSERT_GE(renewals.size(), 4u);
  const absl::Time now = MonotonicClock::Get().Now();
  EXPECT_EQ(renewals[0].second, 0);  // WAITING: nothing runs
  for (size_t i = 0; i < renewals.size(); ++i) {
    EXPECT_GE(renewals[i].first, started);
    EXPECT_LE(renewals[i].first, now);
    if (i > 0) {
      EXPECT_EQ(renewals[i].second, 7);
      EXPECT_GT(renewals[i].first, renewals[i - 1].first);
    }
  }
  // Acks are the session's business, not the agent's.
  for (const v1::CoordinatorMessage& m : events_.messages()) EXPECT_FALSE(m.has_heartbeat_ack());
  auto heartbeat =
      service_->WaitForMessage([](const v1::AgentMessage& m) { return m.has_heartbeat(); });
  ASSERT_TRUE(heartbeat.has_value());
  EXPECT_GT(heartbeat->heartbeat().sequence(), 0u);
}

TEST_F(GrpcSessionClientTest, LeaseExpired_ResumesAtOnceSayingWorkersAreFrozen_Once) {
  StartServer({Plan::kServe, Plan::kServe, Plan::kBreak, Plan::kServe});
  StartClient(42);
  client_->SetGeneration(5);
  ASSERT_TRUE(events_.WaitForRegistrations(1));
  client_->LeaseExpired();  // drops the live stream
  ASSERT_TRUE(events_.WaitForRegistrations(2));
  auto reg = service_->registers();
  ASSERT_EQ(reg.size(), 2u);
  EXPECT_FALSE(reg[0].workers_frozen());
  EXPECT_TRUE(reg[1].workers_frozen());
  EXPECT_EQ(reg[1].incarnation(), 42u);  // a resume, not a new agent
  EXPECT_EQ(reg[1].generation(), 5);
  EXPECT_EQ(events_.fenced(), 0);
  client_->SetGeneration(6);  // the next generation's workers run
  service_->CancelLatest();
  ASSERT_TRUE(events_.WaitForRegistrations(4));
  reg = service_->registers();
  EXPECT_FALSE(reg[3].workers_frozen());
  EXPECT_EQ(reg[3].generation(), 6);
}

}  // namespace
}  // namespace ddp::client
