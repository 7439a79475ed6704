// GrpcSessionClient: heartbeats over UDP (see grpc_session_client.h).

#include <string>

#include "absl/strings/string_view.h"
#include "client/agent/grpc_session_client.h"
#include "common/clock.h"
#include "common/endpoint.h"
#include "common/heartbeat/heartbeat_datagram.h"
#include "common/logging.h"

namespace ddp::client {

void GrpcSessionClient::OpenHeartbeatChannel() {
  int port = 0;
  {
    absl::MutexLock lock(&mu_);
    udp_.reset();
    if (core_.heartbeat_channel() == nullptr) return;
    port = core_.heartbeat_channel()->udp_port();
  }
  const std::string host = EndpointHost(current_target());
  auto socket = heartbeat::UdpSocket::Connect(host, port);
  absl::MutexLock lock(&mu_);
  if (!socket.ok()) {
    DDP_LOG(WARNING) << "heartbeats stay on the stream: " << socket.status();
    core_.DropHeartbeatChannel();
    return;
  }
  udp_ = std::make_shared<heartbeat::UdpSocket>(*std::move(socket));
  DDP_LOG(DEBUG) << "heartbeats over UDP to " << host << ":" << port;
}

void GrpcSessionClient::CloseHeartbeatChannel() {
  absl::MutexLock lock(&mu_);
  udp_.reset();
}

SessionCore::HeartbeatRoute GrpcSessionClient::SendHeartbeatDatagram(bool carries_states,
                                                                     const std::string& states,
                                                                     uint64_t* states_sequence) {
  std::shared_ptr<heartbeat::UdpSocket> udp;
  std::string bytes;
  SessionCore::HeartbeatRoute route = SessionCore::HeartbeatRoute::kStream;
  {
    absl::MutexLock lock(&mu_);
    // The send time renews the lease: on the lease's clock (Options::clock).
    const absl::Time now = clock_.Now();
    if (udp_ == nullptr) return route;
    route = core_.RouteHeartbeat(carries_states, now, states.size());
    if (route == SessionCore::HeartbeatRoute::kStream) return route;
    udp = udp_;
    const heartbeat::DatagramKey key(core_.heartbeat_channel()->key());
    if (route == SessionCore::HeartbeatRoute::kStatesDatagram) {
      const heartbeat::DatagramFields fields = core_.StatesDatagram(now);
      *states_sequence = fields.sequence;
      // Written before now, on the stream this channel belongs to: where the
      // coordinator takes these states.
      bytes = *heartbeat::EncodeStatesDatagram(fields, stream_written_.load(), states, key);
    } else {
      const heartbeat::Datagram datagram =
          heartbeat::EncodeDatagram(core_.HeartbeatDatagram(core_.AckDue(now), now), key);
      bytes.assign(reinterpret_cast<const char*>(datagram.data()), datagram.size());
    }
  }
  // A datagram the kernel refuses is lost like one the network drops: an
  // asked one is made up for on the stream (SessionCore::SendAsDatagram).
  if (!udp->Send(bytes.data(), bytes.size())) {
    DDP_LOG(DEBUG) << "heartbeat datagram not sent";
  }
  return route;
}

void GrpcSessionClient::DatagramLoop() {
  while (true) {
    std::shared_ptr<heartbeat::UdpSocket> udp;
    std::string key;
    uint64_t session = 0;
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closing_ || udp_ != nullptr; };
      mu_.AwaitWithTimeout(absl::Condition(&wake), absl::Milliseconds(500));
      if (closing_) return;
      if (udp_ == nullptr || core_.heartbeat_channel() == nullptr) continue;
      udp = udp_;
      key = core_.heartbeat_channel()->key();
      session = core_.heartbeat_channel()->session();
    }
    char buffer[heartbeat::kDatagramSize + 1];
    // Short waits: Close and a replaced socket are noticed soon.
    const int n = udp->Receive(buffer, sizeof(buffer), absl::Milliseconds(200));
    if (n < 0) continue;
    auto ack =
        heartbeat::DecodeDatagram(absl::string_view(buffer, n), heartbeat::DatagramKind::kAck, key);
    if (!ack.ok() || ack->session != session) {
      DDP_LOG(DEBUG) << "ignored a datagram from the coordinator's UDP port: "
                     << (ack.ok() ? "another session's" : ack.status().ToString());
      continue;
    }
    std::optional<absl::Time> sent_at;
    {
      absl::MutexLock lock(&mu_);
      if (udp_ != udp) continue;  // the stream that granted it ended meanwhile
      sent_at = core_.DatagramAnswered(*ack);
      if (ack->flag) {
        DDP_LOG(INFO) << "the coordinator refused a heartbeat datagram; heartbeating on the "
                         "stream";
        udp_.reset();
      }
    }
    if (sent_at) events_->OnLeaseRenewed(*sent_at, ack->generation);
  }
}

}  // namespace ddp::client
