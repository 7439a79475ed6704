// Heartbeats over UDP through the real registry: datagrams keep a node
// alive only while its session's stream is open, and their acks carry the
// running generation (the lease).

#include <memory>
#include <optional>
#include <string>

#include "common/heartbeat/heartbeat_datagram.h"
#include "common/heartbeat/udp_socket.h"
#include "coordinator/session/testing/job_services_fixture.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

using ::ddp::session::testing::FakeAgent;
using ::ddp::session::testing::FakeAgentOptions;
using ::ddp::session::testing::FastSettings;
using ::ddp::session::testing::kWait;

class HeartbeatUdpTest : public testing::JobServicesTest {
 protected:
  void SetUp() override {
    heartbeat_udp_ = true;
    JobServicesTest::SetUp();
  }

  // An agent that never heartbeats on its stream (the datagrams are the
  // test's), registered in a one-node job with a 300 ms heartbeat timeout.
  FakeAgent& QuietAgent(const std::string& job) {
    FakeAgentOptions options;
    options.job_id = job;
    options.node_id = "a";
    options.incarnation = 5;
    options.settings = FastSettings(1, 1);
    options.heartbeat_interval = absl::Hours(1);
    return MakeAgent(std::move(options));
  }

  // Sends heartbeat datagrams every 50 ms for `how_long`; returns the acks'
  // running generations (of those asked: every other).
  std::vector<int64_t> Heartbeat(const v1::HeartbeatChannel& channel, int64_t generation,
                                 absl::Duration how_long) {
    auto socket = heartbeat::UdpSocket::Connect("127.0.0.1", channel.udp_port());
    EXPECT_TRUE(socket.ok()) << socket.status();
    std::vector<int64_t> running;
    for (absl::Time end = absl::Now() + how_long; absl::Now() < end;) {
      heartbeat::DatagramFields f;
      f.session = channel.session();
      f.sequence = ++sequence_;
      f.generation = generation;
      f.flag = sequence_ % 2 == 0;
      const heartbeat::Datagram d = heartbeat::EncodeDatagram(f, channel.key());
      EXPECT_TRUE(socket->Send(d.data(), d.size()));
      char buffer[64];
      const int n = socket->Receive(buffer, sizeof(buffer), absl::Milliseconds(50));
      if (n > 0) {
        auto ack = heartbeat::DecodeDatagram(absl::string_view(buffer, n),
                                             heartbeat::DatagramKind::kAck, channel.key());
        EXPECT_TRUE(ack.ok()) << ack.status();
        if (ack.ok()) running.push_back(ack->generation);
        absl::SleepFor(absl::Milliseconds(50));
      }
    }
    return running;
  }

  // A states datagram of `generation` made at `stream_mark` with `states`;
  // its ack (nullopt: none came). With `until_answered`, sent again (a new
  // sequence, every 10 ms, 200 times at most) while the ack says neither
  // taken nor refused, as an agent does: the reader may still hold the
  // session's cursor for the message it handles (the MasterInfo, whose
  // assignment the agent can have before its handling returns).
  std::optional<heartbeat::DatagramFields> SendStatesDatagram(const v1::HeartbeatChannel& channel,
                                                              int64_t generation,
                                                              uint64_t stream_mark,
                                                              const v1::Heartbeat& states,
                                                              bool until_answered = false) {
    for (int attempt = 1;; ++attempt) {
      std::optional<heartbeat::DatagramFields> ack =
          SendStatesDatagramOnce(channel, generation, stream_mark, states);
      if (!until_answered || !ack.has_value() || ack->states_taken || ack->flag ||
          attempt == 200) {
        return ack;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  std::optional<heartbeat::DatagramFields> SendStatesDatagramOnce(
      const v1::HeartbeatChannel& channel, int64_t generation, uint64_t stream_mark,
      const v1::Heartbeat& states) {
    auto socket = heartbeat::UdpSocket::Connect("127.0.0.1", channel.udp_port());
    EXPECT_TRUE(socket.ok()) << socket.status();
    if (!socket.ok()) return std::nullopt;
    heartbeat::DatagramFields f;
    f.kind = heartbeat::DatagramKind::kStates;
    f.session = channel.session();
    f.sequence = ++sequence_;
    f.generation = generation;
    f.flag = true;
    const std::optional<std::string> d = heartbeat::EncodeStatesDatagram(
        f, stream_mark, states.SerializeAsString(), heartbeat::DatagramKey(channel.key()));
    EXPECT_TRUE(d.has_value());
    if (!d.has_value()) return std::nullopt;
    EXPECT_TRUE(socket->Send(d->data(), d->size()));
    char buffer[64];
    const int n = socket->Receive(buffer, sizeof(buffer), kWait);
    if (n <= 0) return std::nullopt;
    auto ack = heartbeat::DecodeDatagram(absl::string_view(buffer, n),
                                         heartbeat::DatagramKind::kAck, channel.key());
    EXPECT_TRUE(ack.ok()) << ack.status();
    if (!ack.ok()) return std::nullopt;
    return *ack;
  }

  // The same with rank 0 reporting step `step`: whether the states were
  // taken (nullopt: no ack).
  std::optional<bool> SendStates(const v1::HeartbeatChannel& channel, int64_t generation,
                                 uint64_t stream_mark, int64_t step, bool until_answered = false) {
    v1::Heartbeat states;
    v1::WorkerState* worker = states.add_workers();
    worker->set_local_rank(0);
    worker->set_state(v1::WORKER_RUNNING);
    worker->mutable_progress()->set_step(step);
    const std::optional<heartbeat::DatagramFields> ack =
        SendStatesDatagram(channel, generation, stream_mark, states, until_answered);
    if (!ack.has_value()) return std::nullopt;
    EXPECT_FALSE(ack->flag) << "refused";
    return ack->states_taken;
  }

  // Rank 0's last reported step in `job` (-1: none).
  int64_t ReportedStep(const std::string& job) {
    const v1::Job got = GetJob(job);
    for (const v1::Member& member : got.members()) {
      for (const v1::WorkerProgress& p : member.progress()) {
        if (p.local_rank() == 0) return p.step();
      }
    }
    return -1;
  }

  uint64_t sequence_ = 0;
};

TEST_F(HeartbeatUdpTest, DatagramsAloneKeepTheNode_AndTheirAcksCarryTheRunningGeneration) {
  FakeAgent& agent = QuietAgent("udp");
  absl::StatusOr<v1::Registered> registered = agent.Register(kWait);
  ASSERT_TRUE(registered.ok()) << registered.status();
  ASSERT_TRUE(registered->has_heartbeat_channel());
  const v1::HeartbeatChannel channel = registered->heartbeat_channel();
  EXPECT_EQ(channel.udp_port(), services_->heartbeat_udp_port());
  EXPECT_EQ(channel.key().size(), heartbeat::kKeySize);
  ASSERT_TRUE(agent.WaitForAssignment(1, kWait).ok());

  // Five heartbeat timeouts on datagrams alone: the node stays, nothing restarts.
  const std::vector<int64_t> running = Heartbeat(channel, 1, absl::Milliseconds(1500));
  ASSERT_GE(running.size(), 5u);
  EXPECT_EQ(running.back(), 1);
  v1::Job job = GetJob("udp");
  EXPECT_EQ(job.state(), v1::RUNNING);
  EXPECT_EQ(job.generation(), 1);
  EXPECT_EQ(job.member_count(), 1);
  EXPECT_GE(services_->heartbeat_endpoint_for_testing()->stats().accepted, 10);

  // Silence: the node is lost within the heartbeat timeout, as without UDP.
  absl::SleepFor(absl::Milliseconds(600));
  EXPECT_EQ(GetJob("udp").member_count(), 0);
}

TEST_F(HeartbeatUdpTest, AfterTheStreamClosesDatagramsNoLongerCount) {
  FakeAgent& agent = QuietAgent("closed");
  absl::StatusOr<v1::Registered> registered = agent.Register(kWait);
  ASSERT_TRUE(registered.ok()) << registered.status();
  ASSERT_TRUE(agent.WaitForAssignment(1, kWait).ok());
  const v1::HeartbeatChannel channel = registered->heartbeat_channel();
  agent.Disconnect();  // the stream ends; the datagrams go on
  for (int i = 0; i < 200 && services_->heartbeat_endpoint_for_testing()->open_sessions() > 0;
       ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(services_->heartbeat_endpoint_for_testing()->open_sessions(), 0u);
  const std::vector<int64_t> running = Heartbeat(channel, 1, absl::Milliseconds(800));
  EXPECT_TRUE(running.empty());                   // no answers
  EXPECT_EQ(GetJob("closed").member_count(), 0);  // lost after 300 ms
  EXPECT_GE(services_->heartbeat_endpoint_for_testing()->stats().dropped, 5);
}

TEST_F(HeartbeatUdpTest, StatesDatagramsReachTheJobOnlyAtTheirPointOfTheStream) {
  FakeAgent& agent = QuietAgent("states");
  absl::StatusOr<v1::Registered> registered = agent.Register(kWait);
  ASSERT_TRUE(registered.ok()) << registered.status();
  ASSERT_TRUE(registered->heartbeat_channel().worker_states());
  ASSERT_TRUE(agent.WaitForAssignment(1, kWait).ok());
  const v1::HeartbeatChannel channel = registered->heartbeat_channel();

  // After Register the agent wrote one message on its stream (MasterInfo: it
  // is rank 0), which the coordinator has handled: mark 1 is now.
  EXPECT_EQ(SendStates(channel, 1, /*stream_mark=*/1, /*step=*/42, /*until_answered=*/true), true);
  EXPECT_EQ(ReportedStep("states"), 42);
  // Made after a stream message the coordinator has not read: not yet.
  EXPECT_EQ(SendStates(channel, 1, /*stream_mark=*/2, /*step=*/43), false);
  // Made before the MasterInfo: outdated.
  EXPECT_EQ(SendStates(channel, 1, /*stream_mark=*/0, /*step=*/41), false);
  EXPECT_EQ(ReportedStep("states"), 42);
  EXPECT_EQ(SendStates(channel, 1, 1, 44, /*until_answered=*/true), true);
  EXPECT_EQ(ReportedStep("states"), 44);
  const UdpHeartbeatEndpoint::Stats stats = services_->heartbeat_endpoint_for_testing()->stats();
  EXPECT_EQ(stats.states_taken, 2);
  EXPECT_GE(stats.states_deferred, 2);  // and any the reader's lock deferred
  EXPECT_EQ(GetJob("states").state(), v1::RUNNING);
}

TEST_F(HeartbeatUdpTest, StatesDatagramWithBadStatesMovesTheAgentToItsStream) {
  FakeAgent& agent = QuietAgent("bad-states");
  absl::StatusOr<v1::Registered> registered = agent.Register(kWait);
  ASSERT_TRUE(registered.ok()) << registered.status();
  ASSERT_TRUE(agent.WaitForAssignment(1, kWait).ok());
  const v1::HeartbeatChannel channel = registered->heartbeat_channel();
  v1::Heartbeat states;
  states.add_workers()->set_local_rank(0);
  states.mutable_header()->set_job_id("bad-states");  // only workers belong here
  const std::optional<heartbeat::DatagramFields> ack =
      SendStatesDatagram(channel, 1, /*stream_mark=*/1, states, /*until_answered=*/true);
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->flag);  // refused: the agent heartbeats on its stream
  EXPECT_FALSE(ack->states_taken);
  EXPECT_EQ(services_->heartbeat_endpoint_for_testing()->stats().refused, 1);
}

TEST_F(HeartbeatUdpTest, WithoutTheOptionRegisteredNamesNoChannel) {
  StopServer();
  heartbeat_udp_ = false;
  StartServer(&memory_store_);
  FakeAgent& agent = QuietAgent("plain");
  absl::StatusOr<v1::Registered> registered = agent.Register(kWait);
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_FALSE(registered->has_heartbeat_channel());
  EXPECT_EQ(services_->heartbeat_endpoint_for_testing(), nullptr);
  EXPECT_EQ(services_->heartbeat_udp_port(), 0);
}

}  // namespace
}  // namespace ddp::session
