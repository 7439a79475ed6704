// GrpcSessionClient's heartbeats over UDP, against an in-process fake
// SessionService whose Registered names a heartbeat channel served by the
// test (a UDP socket that answers, stays silent, or refuses).

#include <sys/socket.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/agent/grpc_session_client.h"
#include "common/heartbeat/heartbeat_datagram.h"
#include "common/heartbeat/udp_socket.h"
#include "ddp/v1/session.grpc.pb.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/e2e/tcp_proxy.h"

namespace ddp::client {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);  // loose upper bound
constexpr uint64_t kSession = 0xfeedULL;

enum class UdpMode { kAnswer, kSilent, kRefuse };

// The coordinator's UDP side: verifies heartbeat datagrams, answers the asked
// ones as the mode says.
class FakeUdpEndpoint {
 public:
  explicit FakeUdpEndpoint(std::string key) : key_(std::move(key)) {
    auto socket = heartbeat::UdpSocket::Bind("127.0.0.1", 0);
    EXPECT_TRUE(socket.ok()) << socket.status();
    socket_ = *std::move(socket);
    thread_ = std::thread([this] { Loop(); });
  }
  ~FakeUdpEndpoint() {
    stop_ = true;
    socket_.ShutdownReads();
    thread_.join();
  }
  int port() const { return socket_.local_port(); }
  void set_mode(UdpMode mode) { mode_ = mode; }
  int heartbeats() const { return heartbeats_.load(); }
  int asked() const { return asked_.load(); }
  int bad() const { return bad_.load(); }
  // States datagrams: the first `n` are deferred (acked without "taken").
  void DeferStates(int n) { defer_states_ = n; }
  struct States {
    uint64_t stream_mark = 0;
    v1::Heartbeat heartbeat;
    bool taken = false;
  };
  std::vector<States> states() {
    absl::MutexLock lock(&mu_);
    return states_;
  }

 private:
  void Loop() {
    char buffer[heartbeat::kMaxStatesDatagramSize + 1];
    while (!stop_) {
      sockaddr_storage from{};
      socklen_t length = sizeof(from);
      const ssize_t n = recvfrom(socket_.fd(), buffer, sizeof(buffer), 0,
                                 reinterpret_cast<sockaddr*>(&from), &length);
      if (n <= 0) continue;
      const absl::string_view bytes(buffer, n);
      auto decoded = heartbeat::DecodeAgentDatagram(bytes, heartbeat::DatagramKey(key_));
      if (!decoded.ok() || decoded->fields.session != kSession) {
        ++bad_;
        continue;
      }
      const heartbeat::DatagramFields& fields = decoded->fields;
      bool taken = false;
      if (fields.kind == heartbeat::DatagramKind::kStates) {
        States got;
        got.stream_mark = decoded->stream_mark;
        EXPECT_TRUE(got.heartbeat.ParseFromArray(decoded->states.data(),
                                                 static_cast<int>(decoded->states.size())));
        taken = got.taken = defer_states_.fetch_sub(1) <= 0;
        absl::MutexLock lock(&mu_);
        states_.push_back(std::move(got));
      }
      ++heartbeats_;
      const UdpMode mode = mode_.load();
      if (fields.flag) ++asked_;
      if (mode == UdpMode::kSilent || (mode == UdpMode::kAnswer && !fields.flag)) continue;
      heartbeat::DatagramFields ack;
      ack.kind = heartbeat::DatagramKind::kAck;
      ack.session = kSession;
      ack.sequence = fields.sequence;
      ack.generation = 7;
      ack.flag = mode == UdpMode::kRefuse;
      ack.states_taken = taken && !ack.flag;
      const heartbeat::Datagram d = heartbeat::EncodeDatagram(ack, key_);
      sendto(socket_.fd(), d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&from), length);
    }
  }

  const std::string key_;
  heartbeat::UdpSocket socket_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<UdpMode> mode_{UdpMode::kAnswer};
  std::atomic<int> heartbeats_{0};
  std::atomic<int> asked_{0};
  std::atomic<int> bad_{0};
  std::atomic<int> defer_states_{0};
  absl::Mutex mu_;
  std::vector<States> states_ ABSL_GUARDED_BY(mu_);
};

// Registered with a heartbeat channel; acknowledges stream heartbeats that ask.
class FakeSessionService final : public v1::SessionService::Service {
 public:
  FakeSessionService(int udp_port, std::string key, bool worker_states)
      : udp_port_(udp_port), key_(std::move(key)), worker_states_(worker_states) {}

  grpc::Status Session(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::AgentMessage>* stream) override {
    v1::AgentMessage first;
    if (!stream->Read(&first)) return grpc::Status::CANCELLED;
    v1::CoordinatorMessage registered;
    v1::Registered* r = registered.mutable_registered();
    r->set_generation(7);
    r->set_state(v1::RUNNING);
    r->set_role(v1::MEMBER);
    r->mutable_settings()->set_heartbeat_interval_ms(20);
    r->set_lease_ms(300);
    r->set_lease_kill_ms(400);
    r->mutable_heartbeat_channel()->set_udp_port(udp_port_);
    r->mutable_heartbeat_channel()->set_session(kSession);
    r->mutable_heartbeat_channel()->set_key(key_);
    r->mutable_heartbeat_channel()->set_worker_states(worker_states_);
    stream->Write(registered);
    v1::AgentMessage message;
    while (stream->Read(&message)) {
      if (!message.has_heartbeat()) continue;
      const v1::Heartbeat& h = message.heartbeat();
      {
        absl::MutexLock lock(&mu_);
        ++stream_heartbeats_;
        if (h.workers_size() == 0) ++empty_stream_heartbeats_;
        if (h.sequence() != 0) ++asking_stream_heartbeats_;
      }
      if (h.sequence() != 0) {
        v1::CoordinatorMessage ack;
        ack.mutable_heartbeat_ack()->set_sequence(h.sequence());
        ack.mutable_heartbeat_ack()->set_running_generation(7);
        stream->Write(ack);
      }
    }
    return grpc::Status::OK;
  }
  int stream_heartbeats() {
    absl::MutexLock lock(&mu_);
    return stream_heartbeats_;
  }
  int empty_stream_heartbeats() {
    absl::MutexLock lock(&mu_);
    return empty_stream_heartbeats_;
  }
  // Stream heartbeats that asked for an ack.
  int asking_stream_heartbeats() {
    absl::MutexLock lock(&mu_);
    return asking_stream_heartbeats_;
  }

 private:
  const int udp_port_;
  const std::string key_;
  const bool worker_states_;
  absl::Mutex mu_;
  int stream_heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  int empty_stream_heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  int asking_stream_heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
};

class CountingEvents : public SessionEvents {
 public:
  void OnRegistered(const v1::Registered&, bool) override {
    absl::MutexLock lock(&mu_);
    ++registrations_;
  }
  void OnCoordinatorMessage(const v1::CoordinatorMessage&) override {}
  void OnFenced(const absl::Status&) override {}
  void OnSessionFailed(const absl::Status&) override {}
  std::vector<v1::WorkerState> WorkerStates() override {
    v1::WorkerState state;  // changes only when the test says: the first heartbeat carries it
    state.set_local_rank(0);
    state.set_state(v1::WORKER_RUNNING);
    absl::MutexLock lock(&mu_);
    state.set_pid(pid_);
    return {state};
  }
  void set_pid(int pid) {
    absl::MutexLock lock(&mu_);
    pid_ = pid;
  }
  void OnLeaseGranted(absl::Duration) override {}
  void OnLeaseRenewed(absl::Time, int64_t running_generation) override {
    absl::MutexLock lock(&mu_);
    ++renewals_;
    last_generation_ = running_generation;
  }
  int renewals() {
    absl::MutexLock lock(&mu_);
    return renewals_;
  }
  int registrations() {
    absl::MutexLock lock(&mu_);
    return registrations_;
  }

 private:
  absl::Mutex mu_;
  int renewals_ ABSL_GUARDED_BY(mu_) = 0;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_generation_ ABSL_GUARDED_BY(mu_) = 0;
  int pid_ ABSL_GUARDED_BY(mu_) = 0;
};

class GrpcSessionClientDatagramTest : public ::testing::Test {
 protected:
  // `via_proxy`: the stream goes through a TcpProxy (proxy_) the test can
  // silence; the datagrams go straight to the UDP endpoint.
  // `worker_states`: the channel takes states datagrams (an older
  // coordinator's does not).
  void Start(UdpMode mode, bool via_proxy = false, bool worker_states = false,
             int defer_states = 0) {
    const std::string key = heartbeat::NewKey();
    udp_ = std::make_unique<FakeUdpEndpoint>(key);
    udp_->set_mode(mode);
    udp_->DeferStates(defer_states);
    service_ = std::make_unique<FakeSessionService>(udp_->port(), key, worker_states);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    SessionClientOptions options;
    options.target = absl::StrCat("127.0.0.1:", port);
    if (via_proxy) {
      auto proxy = testing::TcpProxy::Start(port);
      ASSERT_TRUE(proxy.ok()) << proxy.status();
      proxy_ = *std::move(proxy);
      options.target = proxy_->address();
      options.keepalive_time = absl::Seconds(1);
      options.keepalive_timeout = absl::Seconds(1);
    }
    options.registration.set_job_id("j");
    options.registration.set_node_id("node-a");
    options.registration.set_nproc(1);
    options.close_grace = absl::Milliseconds(200);
    client_ = std::make_unique<GrpcSessionClient>(options, &events_, 42);
    client_->Start();
  }
  void TearDown() override {
    if (proxy_) proxy_->SetPartitioned(false);
    if (client_) client_->Close();
    if (server_) server_->Shutdown();
  }
  // Waits until `done` holds (polling), at most kWait.
  static bool Eventually(const std::function<bool()>& done) {
    const absl::Time give_up = absl::Now() + kWait;
    while (!done()) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return true;
  }

  CountingEvents events_;
  std::unique_ptr<FakeUdpEndpoint> udp_;
  std::unique_ptr<FakeSessionService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcSessionClient> client_;
  std::unique_ptr<testing::TcpProxy> proxy_;
};

TEST_F(GrpcSessionClientDatagramTest, EmptyHeartbeatsGoAsDatagramsAndTheirAcksRenewTheLease) {
  Start(UdpMode::kAnswer);
  // 20 ms heartbeats, a 300 ms lease renewed every 100 ms: over a second about
  // 50 heartbeats and 10 renewals, all over UDP.
  ASSERT_TRUE(Eventually([&] { return udp_->asked() >= 5 && udp_->heartbeats() >= 30; }));
  ASSERT_TRUE(Eventually([&] { return events_.renewals() >= 6; }));  // 1 from Registered
  EXPECT_EQ(udp_->bad(), 0);
  // The stream carried the worker states once, and no empty heartbeat; the
  // lease renewal due with the states went as a datagram, not as a stream ask.
  EXPECT_EQ(service_->stream_heartbeats(), 1);
  EXPECT_EQ(service_->empty_stream_heartbeats(), 0);
  EXPECT_EQ(service_->asking_stream_heartbeats(), 0);
  // Most heartbeats do not ask (an ack is due once a third of the lease passed).
  EXPECT_LT(udp_->asked() * 2, udp_->heartbeats());
}

TEST_F(GrpcSessionClientDatagramTest, UnansweredDatagramsMoveHeartbeatsToTheStream) {
  Start(UdpMode::kSilent);
  // Each unanswered ask is made up for on the stream, which renews the lease;
  // after three the client stops using UDP for this stream.
  ASSERT_TRUE(Eventually([&] { return service_->empty_stream_heartbeats() >= 20; }));
  EXPECT_GE(events_.renewals(), 4);
  const int asked = udp_->asked();
  EXPECT_EQ(asked, SessionCore::kMaxDatagramMisses);
  const int datagrams = udp_->heartbeats();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(udp_->heartbeats(), datagrams);  // no more datagrams
}

TEST_F(GrpcSessionClientDatagramTest, ARefusalMovesHeartbeatsToTheStream) {
  Start(UdpMode::kRefuse);
  ASSERT_TRUE(Eventually([&] { return udp_->heartbeats() >= 1; }));
  ASSERT_TRUE(Eventually([&] { return service_->empty_stream_heartbeats() >= 10; }));
  const int datagrams = udp_->heartbeats();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(udp_->heartbeats(), datagrams);
  EXPECT_GE(events_.renewals(), 2);
}

// A path that carries UDP but no longer TCP (or a NAT that forgot the idle
// TCP flow): the keepalive ping finds the dead stream, which ends, and with it
// the datagrams and the lease renewals they brought.
TEST_F(GrpcSessionClientDatagramTest, ASilentStreamEndsAndItsDatagramsStop) {
  Start(UdpMode::kAnswer, /*via_proxy=*/true);
  ASSERT_TRUE(Eventually([&] { return events_.renewals() >= 3 && udp_->heartbeats() >= 10; }));
  proxy_->SetPartitioned(true);
  // Within keepalive time + timeout (1 s + 1 s, loosely) the stream ends; the
  // client then only tries to register again (through the silent proxy).
  absl::SleepFor(absl::Seconds(4));
  const int datagrams = udp_->heartbeats();
  const int renewals = events_.renewals();
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(udp_->heartbeats(), datagrams) << "datagrams still sent for a dead stream";
  EXPECT_EQ(events_.renewals(), renewals) << "the lease still renewed over UDP";
  // The path heals: the session resumes, and UDP with it.
  proxy_->SetPartitioned(false);
  ASSERT_TRUE(Eventually([&] { return events_.registrations() >= 2; }));
  ASSERT_TRUE(Eventually([&] { return udp_->heartbeats() > datagrams + 5; }));
}

TEST_F(GrpcSessionClientDatagramTest, StatesGoAsDatagramsSentAgainUntilTaken) {
  Start(UdpMode::kAnswer, /*via_proxy=*/false, /*worker_states=*/true, /*defer_states=*/2);
  // Two deferred (the coordinator's stream point did not match), the third
  // taken; then only empty heartbeats until the states change.
  ASSERT_TRUE(Eventually([&] {
    const auto states = udp_->states();
    return !states.empty() && states.back().taken;
  }));
  absl::SleepFor(absl::Milliseconds(200));  // ~10 heartbeats
  std::vector<FakeUdpEndpoint::States> states = udp_->states();
  ASSERT_EQ(states.size(), 3u);
  for (const FakeUdpEndpoint::States& s : states) {
    EXPECT_EQ(s.stream_mark, 0u);  // nothing written on the stream after Register
    ASSERT_EQ(s.heartbeat.workers_size(), 1);
    EXPECT_EQ(s.heartbeat.workers(0).state(), v1::WORKER_RUNNING);
    EXPECT_FALSE(s.heartbeat.has_header());
    EXPECT_EQ(s.heartbeat.sequence(), 0u);
  }
  EXPECT_EQ(service_->stream_heartbeats(), 0) << "states went on the stream";
  EXPECT_GT(udp_->heartbeats(), 6);
  EXPECT_EQ(udp_->bad(), 0);

  // A message on the stream, then new states: their datagram names it.
  v1::AgentMessage exited;
  exited.mutable_worker_exited()->set_local_rank(0);
  client_->Send(exited);
  events_.set_pid(4242);
  ASSERT_TRUE(Eventually([&] { return udp_->states().size() >= 4; }));
  states = udp_->states();
  EXPECT_EQ(states[3].stream_mark, 1u);
  ASSERT_EQ(states[3].heartbeat.workers_size(), 1);
  EXPECT_EQ(states[3].heartbeat.workers(0).pid(), 4242);
  EXPECT_TRUE(states[3].taken);
  EXPECT_EQ(service_->stream_heartbeats(), 0);
  ASSERT_TRUE(Eventually([&] { return events_.renewals() >= 3; }));  // the acks renew the lease
}

TEST_F(GrpcSessionClientDatagramTest, StatesOnTheStreamWhenTheirDatagramsAreRefused) {
  Start(UdpMode::kRefuse, /*via_proxy=*/false, /*worker_states=*/true);
  ASSERT_TRUE(Eventually([&] { return !udp_->states().empty(); }));
  // Refused: the stream carries the heartbeats from now on, the states first.
  ASSERT_TRUE(Eventually([&] { return service_->stream_heartbeats() >= 3; }));
  EXPECT_EQ(service_->stream_heartbeats() - service_->empty_stream_heartbeats(), 1);
  EXPECT_EQ(udp_->states().size(), 1u);
}

}  // namespace
}  // namespace ddp::client
