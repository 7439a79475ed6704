#include "coordinator/session/udp_heartbeat_endpoint.h"

#include <pthread.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/heartbeat/heartbeat_datagram.h"
#include "common/logging.h"

namespace ddp::session {
namespace {

using heartbeat::Datagram;
using heartbeat::DatagramFields;
using heartbeat::DatagramKind;

constexpr int kBatch = 64;

uint64_t NewSessionId() {
  static thread_local std::mt19937_64 engine(std::random_device{}());
  uint64_t id = 0;
  while (id == 0) id = engine();
  return id;
}

}  // namespace

UdpHeartbeatEndpoint::UdpHeartbeatEndpoint(Heartbeat heartbeat, States states)
    : heartbeat_(std::move(heartbeat)), states_(std::move(states)) {}

UdpHeartbeatEndpoint::~UdpHeartbeatEndpoint() { Stop(); }

absl::Status UdpHeartbeatEndpoint::Start(const std::string& address, int port,
                                         int receive_buffer_bytes) {
  DDP_CHECK(!thread_.joinable()) << "UdpHeartbeatEndpoint::Start called twice";
  auto socket = heartbeat::UdpSocket::Bind(address, port, receive_buffer_bytes);
  if (!socket.ok()) return socket.status();
  socket_ = *std::move(socket);
  port_ = socket_.local_port();
  // Without root the buffer stops at net.core.rmem_max (about 200 KB by
  // default: some hundreds of datagrams), which a burst from thousands of
  // agents overflows while this thread waits for the registry.
  if (const int granted = socket_.receive_buffer_bytes(); granted < receive_buffer_bytes) {
    DDP_LOG(WARNING) << "heartbeat UDP receive buffer is " << granted << " bytes (wanted "
                     << receive_buffer_bytes
                     << "): with thousands of agents the kernel may drop heartbeat datagrams "
                        "(agents then heartbeat on their streams); raise the limit with sysctl "
                        "-w net.core.rmem_max="
                     << receive_buffer_bytes;
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "udp-heartbeats");
    Loop();
  });
  return absl::OkStatus();
}

void UdpHeartbeatEndpoint::Stop() {
  if (stopping_.exchange(true)) return;
  port_ = 0;
  if (thread_.joinable()) {
    socket_.ShutdownReads();
    thread_.join();
  }
  absl::MutexLock lock(&mu_);
  sessions_.clear();
}

std::optional<HeartbeatChannelGrant> UdpHeartbeatEndpoint::Open(
    const rendezvous::NodeRef& ref, std::shared_ptr<StreamCursor> cursor) {
  const int port = port_.load();
  if (port == 0) return std::nullopt;
  HeartbeatChannelGrant grant;
  grant.port = port;
  grant.key = heartbeat::NewKey();
  if (states_ == nullptr) cursor.reset();
  grant.worker_states = cursor != nullptr;
  // The key schedule is computed outside the lock the datagram thread takes.
  Session session{ref, heartbeat::DatagramKey(grant.key), 0, std::move(cursor)};
  session.ref.generation = 0;
  absl::MutexLock lock(&mu_);
  do {
    grant.session = NewSessionId();
  } while (sessions_.contains(grant.session));
  sessions_.emplace(grant.session, std::move(session));
  return grant;
}

void UdpHeartbeatEndpoint::Close(uint64_t session) {
  absl::MutexLock lock(&mu_);
  sessions_.erase(session);
}

int64_t UdpHeartbeatEndpoint::TakeOverflow() {
  // port_ is set after socket_ (Start) and cleared first (Stop): a non-zero
  // port orders the read of the socket after its assignment.
  if (port_.load() == 0) return 0;
  const int64_t kernel = socket_.dropped_on_arrival();
  if (kernel < 0) return 0;
  absl::MutexLock lock(&overflow_mu_);
  // The kernel's count is 32 bits and wraps; it started at 0 with the socket.
  const int64_t dropped = (kernel - kernel_drops_seen_) & 0xFFFFFFFF;
  kernel_drops_seen_ = kernel;
  if (dropped > 0) overflowed_ += dropped;
  return dropped;
}

UdpHeartbeatEndpoint::Stats UdpHeartbeatEndpoint::stats() const {
  Stats s;
  s.received = received_.load();
  s.accepted = accepted_.load();
  s.acks = acks_.load();
  s.dropped = dropped_.load();
  s.refused = refused_.load();
  s.states_taken = states_taken_.load();
  s.states_deferred = states_deferred_.load();
  s.overflowed = overflowed_.load();
  return s;
}

size_t UdpHeartbeatEndpoint::open_sessions() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

absl::StatusOr<bool> UdpHeartbeatEndpoint::TakeStates(Session& session,
                                                      const heartbeat::StatesDatagram& datagram) {
  // Never waits for the reader: a session busy with a message now is one
  // whose stream point moves; the agent sends its states again.
  if (session.cursor == nullptr || !session.cursor->mu.TryLock()) return false;
  const bool at_point = session.cursor->handled == datagram.stream_mark;
  absl::Status taken = at_point ? states_(session.ref, datagram.states) : absl::OkStatus();
  session.cursor->mu.Unlock();
  if (!taken.ok()) return taken;
  return at_point;
}

void UdpHeartbeatEndpoint::Loop() {
  std::vector<iovec> in_iov(kBatch);
  std::vector<sockaddr_storage> from(kBatch);
  std::vector<mmsghdr> in_msgs(kBatch);
  std::vector<Datagram> out(kBatch);
  std::vector<iovec> out_iov(kBatch);
  std::vector<mmsghdr> out_msgs(kBatch);
  // One byte more than the longest datagram: a longer one is seen as too
  // long, not cut.
  std::vector<std::array<unsigned char, heartbeat::kMaxStatesDatagramSize + 1>> buffers(kBatch);
  while (!stopping_.load()) {
    for (int i = 0; i < kBatch; ++i) {
      in_iov[i] = {buffers[i].data(), buffers[i].size()};
      in_msgs[i] = mmsghdr{};
      in_msgs[i].msg_hdr.msg_iov = &in_iov[i];
      in_msgs[i].msg_hdr.msg_iovlen = 1;
      in_msgs[i].msg_hdr.msg_name = &from[i];
      in_msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
    }
    const int n = recvmmsg(socket_.fd(), in_msgs.data(), kBatch, MSG_WAITFORONE, nullptr);
    if (n <= 0) {
      if (stopping_.load()) break;
      if (n < 0 && errno != EINTR && errno != EAGAIN) {
        DDP_LOG(WARNING) << "heartbeat UDP receive failed: " << strerror(errno);
        absl::SleepFor(absl::Milliseconds(10));  // no busy loop on a persistent error
      }
      continue;
    }
    received_ += n;
    int answers = 0;
    {
      absl::MutexLock lock(&mu_);
      for (int i = 0; i < n; ++i) {
        const absl::string_view bytes(reinterpret_cast<const char*>(buffers[i].data()),
                                      in_msgs[i].msg_len);
        auto id = heartbeat::PeekSession(bytes);
        auto it = id.ok() ? sessions_.find(*id) : sessions_.end();
        if (it == sessions_.end()) {
          ++dropped_;
          continue;
        }
        Session& session = it->second;
        auto decoded = heartbeat::DecodeAgentDatagram(bytes, session.key);
        if (!decoded.ok() || decoded->fields.sequence <= session.last_sequence) {
          ++dropped_;
          continue;
        }
        const DatagramFields& fields = decoded->fields;
        session.last_sequence = fields.sequence;
        session.ref.generation = fields.generation;
        absl::StatusOr<rendezvous::Generation> running = heartbeat_(session.ref);
        DatagramFields ack;
        ack.kind = DatagramKind::kAck;
        ack.session = fields.session;
        ack.sequence = fields.sequence;
        if (running.ok() && fields.kind == DatagramKind::kStates) {
          absl::StatusOr<bool> taken = TakeStates(session, *decoded);
          if (taken.ok()) {
            ack.states_taken = *taken;
            ++(*taken ? states_taken_ : states_deferred_);
          } else {
            running = taken.status();
          }
        }
        if (running.ok()) {
          ++accepted_;
          if (!fields.flag) continue;  // no ack asked
          ack.generation = *running;
        } else {
          ++refused_;
          DDP_LOG(INFO) << "heartbeat datagram of node " << session.ref.node_id << " refused ("
                        << running.status() << "); it heartbeats on its stream from now on";
          ack.flag = true;
        }
        out[answers] = heartbeat::EncodeDatagram(ack, session.key);
        if (!running.ok()) sessions_.erase(it);
        out_iov[answers] = {out[answers].data(), out[answers].size()};
        out_msgs[answers] = mmsghdr{};
        out_msgs[answers].msg_hdr.msg_iov = &out_iov[answers];
        out_msgs[answers].msg_hdr.msg_iovlen = 1;
        out_msgs[answers].msg_hdr.msg_name = &from[i];
        out_msgs[answers].msg_hdr.msg_namelen = in_msgs[i].msg_hdr.msg_namelen;
        ++answers;
      }
    }
    // A full send buffer loses acks like the network would: the agent asks
    // again with its next heartbeat.
    for (int sent = 0; sent < answers;) {
      const int k = sendmmsg(socket_.fd(), out_msgs.data() + sent, answers - sent, MSG_DONTWAIT);
      if (k <= 0) break;
      sent += k;
      acks_ += k;
    }
  }
}

}  // namespace ddp::session
