#include "coordinator/session/udp_heartbeat_endpoint.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/heartbeat/heartbeat_datagram.h"
#include "common/heartbeat/udp_socket.h"
#include "gtest/gtest.h"

namespace ddp::session {
namespace {

using heartbeat::DatagramFields;
using heartbeat::DatagramKind;

// The core's side: records what it was told, answers with `answer`.
struct FakeCore {
  absl::Mutex mu;
  std::vector<rendezvous::NodeRef> heartbeats;
  absl::StatusOr<rendezvous::Generation> answer = rendezvous::Generation{7};

  UdpHeartbeatEndpoint::Heartbeat Fn() {
    return [this](const rendezvous::NodeRef& ref) -> absl::StatusOr<rendezvous::Generation> {
      absl::MutexLock lock(&mu);
      heartbeats.push_back(ref);
      return answer;
    };
  }
  size_t count() {
    absl::MutexLock lock(&mu);
    return heartbeats.size();
  }

  // States datagrams' payloads, answered with `states_answer`.
  std::vector<std::pair<rendezvous::NodeRef, std::string>> states;
  absl::Status states_answer;
  UdpHeartbeatEndpoint::States StatesFn() {
    return [this](const rendezvous::NodeRef& ref, absl::string_view payload) {
      absl::MutexLock lock(&mu);
      states.emplace_back(ref, std::string(payload));
      return states_answer;
    };
  }
  size_t states_count() {
    absl::MutexLock lock(&mu);
    return states.size();
  }
};

class UdpHeartbeatEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = std::make_unique<UdpHeartbeatEndpoint>(core_.Fn(), core_.StatesFn());
    ASSERT_TRUE(endpoint_->Start("127.0.0.1", 0).ok());
    ASSERT_GT(endpoint_->port(), 0);
  }

  // An agent's socket for `grant`.
  heartbeat::UdpSocket Agent(const HeartbeatChannelGrant& grant) {
    auto socket = heartbeat::UdpSocket::Connect("127.0.0.1", grant.port);
    EXPECT_TRUE(socket.ok()) << socket.status();
    return *std::move(socket);
  }

  static void SendHeartbeat(const heartbeat::UdpSocket& socket, const HeartbeatChannelGrant& grant,
                            uint64_t sequence, int64_t generation, bool ask,
                            const std::string& key = "") {
    DatagramFields f;
    f.session = grant.session;
    f.sequence = sequence;
    f.generation = generation;
    f.flag = ask;
    const heartbeat::Datagram d = heartbeat::EncodeDatagram(f, key.empty() ? grant.key : key);
    ASSERT_TRUE(socket.Send(d.data(), d.size()));
  }

  static void SendStates(const heartbeat::UdpSocket& socket, const HeartbeatChannelGrant& grant,
                         uint64_t sequence, uint64_t stream_mark, const std::string& payload) {
    DatagramFields f;
    f.kind = DatagramKind::kStates;
    f.session = grant.session;
    f.sequence = sequence;
    f.generation = 6;
    f.flag = true;
    const std::optional<std::string> d = heartbeat::EncodeStatesDatagram(
        f, stream_mark, payload, heartbeat::DatagramKey(grant.key));
    ASSERT_TRUE(d.has_value());
    ASSERT_TRUE(socket.Send(d->data(), d->size()));
  }

  // The next ack on `socket`, or nullopt within `wait`.
  static std::optional<DatagramFields> ReadAck(const heartbeat::UdpSocket& socket,
                                               const HeartbeatChannelGrant& grant,
                                               absl::Duration wait = absl::Seconds(10)) {
    char buffer[128];
    const int n = socket.Receive(buffer, sizeof(buffer), wait);
    if (n < 0) return std::nullopt;
    auto fields =
        heartbeat::DecodeDatagram(absl::string_view(buffer, n), DatagramKind::kAck, grant.key);
    EXPECT_TRUE(fields.ok()) << fields.status();
    if (!fields.ok()) return std::nullopt;
    return *fields;
  }

  // Waits until the endpoint has seen `received` datagrams.
  void AwaitReceived(int64_t received) {
    for (int i = 0; i < 1000 && endpoint_->stats().received < received; ++i) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSERT_GE(endpoint_->stats().received, received);
  }

  FakeCore core_;
  std::unique_ptr<UdpHeartbeatEndpoint> endpoint_;
};

TEST_F(UdpHeartbeatEndpointTest, AHeartbeatReachesTheCoreAndAnAskedOneIsAcknowledged) {
  auto grant = endpoint_->Open({"job", "node-a", 42, 3});
  ASSERT_TRUE(grant.has_value());
  EXPECT_EQ(grant->key.size(), heartbeat::kKeySize);
  heartbeat::UdpSocket agent = Agent(*grant);
  SendHeartbeat(agent, *grant, /*sequence=*/5, /*generation=*/6, /*ask=*/true);
  auto ack = ReadAck(agent, *grant);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->sequence, 5u);
  EXPECT_EQ(ack->generation, 7);  // the core's running generation
  EXPECT_FALSE(ack->flag);
  ASSERT_EQ(core_.count(), 1u);
  EXPECT_EQ(core_.heartbeats[0].job_id, "job");
  EXPECT_EQ(core_.heartbeats[0].node_id, "node-a");
  EXPECT_EQ(core_.heartbeats[0].incarnation, 42u);
  EXPECT_EQ(core_.heartbeats[0].generation, 6);  // the datagram's

  // Not asked: counted, not answered.
  SendHeartbeat(agent, *grant, 6, 6, /*ask=*/false);
  EXPECT_FALSE(ReadAck(agent, *grant, absl::Milliseconds(200)).has_value());
  EXPECT_EQ(core_.count(), 2u);
  EXPECT_EQ(endpoint_->stats().accepted, 2);
  EXPECT_EQ(endpoint_->stats().acks, 1);
}

TEST_F(UdpHeartbeatEndpointTest, ForgedReplayedMalformedAndUnknownDatagramsAreDropped) {
  auto grant = endpoint_->Open({"job", "node-a", 42, 0});
  auto other = endpoint_->Open({"job", "node-b", 43, 0});
  ASSERT_TRUE(grant && other);
  heartbeat::UdpSocket agent = Agent(*grant);
  SendHeartbeat(agent, *grant, 10, 1, true);
  ASSERT_TRUE(ReadAck(agent, *grant).has_value());
  SendHeartbeat(agent, *grant, 10, 1, true);                       // replayed
  SendHeartbeat(agent, *grant, 9, 1, true);                        // older
  SendHeartbeat(agent, *grant, 11, 1, true, other->key);           // another session's key
  SendHeartbeat(agent, *grant, 12, 1, true, heartbeat::NewKey());  // forged
  ASSERT_TRUE(agent.Send("short", 5));
  std::string long_one(49, 'x');
  ASSERT_TRUE(agent.Send(long_one.data(), long_one.size()));
  HeartbeatChannelGrant unknown = *grant;
  unknown.session ^= 1;
  SendHeartbeat(agent, unknown, 13, 1, true);
  AwaitReceived(8);
  EXPECT_FALSE(ReadAck(agent, *grant, absl::Milliseconds(200)).has_value());
  EXPECT_EQ(core_.count(), 1u);
  EXPECT_EQ(endpoint_->stats().dropped, 7);
  // A later sequence still works.
  SendHeartbeat(agent, *grant, 14, 1, true);
  ASSERT_TRUE(ReadAck(agent, *grant).has_value());
}

TEST_F(UdpHeartbeatEndpointTest, AClosedSessionNoLongerReachesTheCore) {
  auto grant = endpoint_->Open({"job", "node-a", 42, 0});
  ASSERT_TRUE(grant.has_value());
  heartbeat::UdpSocket agent = Agent(*grant);
  endpoint_->Close(grant->session);
  EXPECT_EQ(endpoint_->open_sessions(), 0u);
  SendHeartbeat(agent, *grant, 1, 1, true);
  AwaitReceived(1);
  EXPECT_FALSE(ReadAck(agent, *grant, absl::Milliseconds(200)).has_value());
  EXPECT_EQ(core_.count(), 0u);
}

TEST_F(UdpHeartbeatEndpointTest, ARefusalIsAnsweredAndMovesTheSessionToItsStream) {
  auto grant = endpoint_->Open({"job", "node-a", 42, 0});
  ASSERT_TRUE(grant.has_value());
  heartbeat::UdpSocket agent = Agent(*grant);
  {
    absl::MutexLock lock(&core_.mu);
    core_.answer = absl::AbortedError("fenced");
  }
  SendHeartbeat(agent, *grant, 1, 1, /*ask=*/false);  // refused even when not asked
  auto ack = ReadAck(agent, *grant);
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->flag);
  EXPECT_EQ(endpoint_->stats().refused, 1);
  EXPECT_EQ(endpoint_->open_sessions(), 0u);
  {
    absl::MutexLock lock(&core_.mu);
    core_.answer = rendezvous::Generation{1};
  }
  SendHeartbeat(agent, *grant, 2, 1, true);
  AwaitReceived(2);
  EXPECT_FALSE(ReadAck(agent, *grant, absl::Milliseconds(200)).has_value());
}

TEST_F(UdpHeartbeatEndpointTest, StatesDatagram_TakenOnlyAtItsPointOfTheStream) {
  auto cursor = std::make_shared<StreamCursor>();
  auto grant = endpoint_->Open({"job", "node-a", 42, 0}, cursor);
  ASSERT_TRUE(grant.has_value());
  EXPECT_TRUE(grant->worker_states);
  heartbeat::UdpSocket agent = Agent(*grant);
  // Nothing written on the stream yet, nothing read: taken.
  SendStates(agent, *grant, /*sequence=*/1, /*stream_mark=*/0, "states-1");
  auto ack = ReadAck(agent, *grant);
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->states_taken);
  EXPECT_FALSE(ack->flag);
  EXPECT_EQ(ack->generation, 7);  // a heartbeat as well: the lease
  ASSERT_EQ(core_.states_count(), 1u);
  EXPECT_EQ(core_.states[0].second, "states-1");
  EXPECT_EQ(core_.states[0].first.node_id, "node-a");
  EXPECT_EQ(core_.states[0].first.generation, 6);

  {
    absl::MutexLock lock(&cursor->mu);
    cursor->handled = 2;  // the reader handled two messages since
  }
  // Made before the second (which may be a WorkerExited): behind the stream.
  SendStates(agent, *grant, 2, /*stream_mark=*/1, "stale");
  ack = ReadAck(agent, *grant);
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->states_taken);
  EXPECT_FALSE(ack->flag);
  // Made after a third message the reader has not handled yet: ahead of it.
  SendStates(agent, *grant, 3, /*stream_mark=*/3, "early");
  ack = ReadAck(agent, *grant);
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->states_taken);
  SendStates(agent, *grant, 4, /*stream_mark=*/2, "states-4");
  ack = ReadAck(agent, *grant);
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->states_taken);
  ASSERT_EQ(core_.states_count(), 2u);
  EXPECT_EQ(core_.states[1].second, "states-4");
  EXPECT_EQ(core_.count(), 4u);  // every one renewed the lease
  EXPECT_EQ(endpoint_->stats().states_taken, 2);
  EXPECT_EQ(endpoint_->stats().states_deferred, 2);
}

TEST_F(UdpHeartbeatEndpointTest, StatesDatagram_DeferredWhileTheReaderHandlesAMessage) {
  auto cursor = std::make_shared<StreamCursor>();
  auto grant = endpoint_->Open({"job", "node-a", 42, 0}, cursor);
  ASSERT_TRUE(grant.has_value());
  heartbeat::UdpSocket agent = Agent(*grant);
  {
    absl::MutexLock lock(&cursor->mu);  // the reader, mid-message: its point moves
    SendStates(agent, *grant, 1, 0, "states");
    auto ack = ReadAck(agent, *grant);  // answered without waiting for the reader
    ASSERT_TRUE(ack.has_value());
    EXPECT_FALSE(ack->states_taken);
    EXPECT_FALSE(ack->flag);
  }
  EXPECT_EQ(core_.states_count(), 0u);
  EXPECT_EQ(core_.count(), 1u);
  SendStates(agent, *grant, 2, 0, "states");  // the agent's next heartbeat
  auto ack = ReadAck(agent, *grant);
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->states_taken);
}

TEST_F(UdpHeartbeatEndpointTest, StatesDatagram_NotOfferedNorTakenWithoutACursor) {
  auto grant = endpoint_->Open({"job", "node-a", 42, 0});
  ASSERT_TRUE(grant.has_value());
  EXPECT_FALSE(grant->worker_states);
  heartbeat::UdpSocket agent = Agent(*grant);
  SendStates(agent, *grant, 1, 0, "states");
  auto ack = ReadAck(agent, *grant);
  ASSERT_TRUE(ack.has_value());
  EXPECT_FALSE(ack->states_taken);
  EXPECT_EQ(core_.states_count(), 0u);

  // An endpoint without a way to hand states to the core offers none.
  UdpHeartbeatEndpoint heartbeats_only(core_.Fn());
  ASSERT_TRUE(heartbeats_only.Start("127.0.0.1", 0).ok());
  auto plain = heartbeats_only.Open({"job", "node-b", 43, 0}, std::make_shared<StreamCursor>());
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->worker_states);
}

TEST_F(UdpHeartbeatEndpointTest, StatesDatagram_StatesTheCoreRefusesMoveTheSessionToItsStream) {
  auto grant = endpoint_->Open({"job", "node-a", 42, 0}, std::make_shared<StreamCursor>());
  ASSERT_TRUE(grant.has_value());
  heartbeat::UdpSocket agent = Agent(*grant);
  {
    absl::MutexLock lock(&core_.mu);
    core_.states_answer = absl::InvalidArgumentError("heartbeat lists 9 workers; the limit is 8");
  }
  SendStates(agent, *grant, 1, 0, "too many");
  auto ack = ReadAck(agent, *grant);
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->flag);  // refused: on the stream the same states end the stream
  EXPECT_FALSE(ack->states_taken);
  EXPECT_EQ(endpoint_->stats().refused, 1);
  EXPECT_EQ(endpoint_->open_sessions(), 0u);
}

TEST(UdpHeartbeatEndpointLifecycleTest, NoSessionsBeforeStartOrAfterStop) {
  UdpHeartbeatEndpoint endpoint(
      [](const rendezvous::NodeRef&) { return rendezvous::Generation{0}; });
  EXPECT_FALSE(endpoint.Open({"job", "n", 1, 0}).has_value());
  ASSERT_TRUE(endpoint.Start("127.0.0.1", 0).ok());
  EXPECT_TRUE(endpoint.Open({"job", "n", 1, 0}).has_value());
  endpoint.Stop();
  endpoint.Stop();
  EXPECT_EQ(endpoint.port(), 0);
  EXPECT_FALSE(endpoint.Open({"job", "n", 1, 0}).has_value());
}

// The endpoint's thread falls behind (here: the core holds it): what the
// kernel dropped unread is reported once, for the core's tick to excuse.
TEST(UdpHeartbeatEndpointLifecycleTest, DatagramsDroppedUnread_TakeOverflowReportsThemOnce) {
  absl::Notification entered, release;
  UdpHeartbeatEndpoint endpoint([&](const rendezvous::NodeRef&) {
    if (!entered.HasBeenNotified()) entered.Notify();
    release.WaitForNotification();
    return rendezvous::Generation{0};
  });
  EXPECT_EQ(endpoint.TakeOverflow(), 0);  // not started
  ASSERT_TRUE(endpoint.Start("127.0.0.1", 0, /*receive_buffer_bytes=*/4096).ok());
  auto grant = endpoint.Open({"job", "n", 1, 0});
  ASSERT_TRUE(grant.has_value());
  auto agent = heartbeat::UdpSocket::Connect("127.0.0.1", grant->port);
  ASSERT_TRUE(agent.ok()) << agent.status();
  DatagramFields f;
  f.session = grant->session;
  for (uint64_t sequence = 1; sequence <= 500; ++sequence) {
    f.sequence = sequence;
    const heartbeat::Datagram d = heartbeat::EncodeDatagram(f, grant->key);
    agent->Send(d.data(), d.size());
    if (sequence == 1) entered.WaitForNotification();  // the thread is held from here on
  }
  // Loopback may deliver from a softirq thread a little later on a busy
  // machine: take until two looks 20 ms apart find nothing new.
  int64_t dropped = endpoint.TakeOverflow();
  for (int quiet = 0, i = 0; quiet < 2 && i < 200; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    const int64_t more = endpoint.TakeOverflow();
    dropped += more;
    quiet = (more == 0 && dropped > 0) ? quiet + 1 : 0;
  }
  EXPECT_GT(dropped, 400);
  EXPECT_LT(dropped, 500);
  EXPECT_EQ(endpoint.stats().overflowed, dropped);  // each drop reported once
  release.Notify();
  endpoint.Stop();
  EXPECT_EQ(endpoint.TakeOverflow(), 0);  // stopped
}

TEST(UdpHeartbeatEndpointLifecycleTest, APortInUseIsReported) {
  UdpHeartbeatEndpoint first([](const rendezvous::NodeRef&) { return rendezvous::Generation{0}; });
  ASSERT_TRUE(first.Start("127.0.0.1", 0).ok());
  UdpHeartbeatEndpoint second([](const rendezvous::NodeRef&) { return rendezvous::Generation{0}; });
  absl::Status status = second.Start("127.0.0.1", first.port());
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
}

}  // namespace
}  // namespace ddp::session
