#include "tools/rdzv_sim/sim_datagrams.h"

#include <netdb.h>
#include <pthread.h>

#include <array>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp::rdzv_sim {
namespace {

constexpr size_t kBatch = 64;  // datagrams per sendmmsg / recvmmsg

}  // namespace

absl::StatusOr<std::unique_ptr<SimDatagrams>> SimDatagrams::Create(const std::string& host,
                                                                   int sockets) {
  std::unique_ptr<SimDatagrams> d(new SimDatagrams());
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), "1", &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  std::memcpy(&d->coordinator_, found->ai_addr, found->ai_addrlen);
  d->coordinator_length_ = found->ai_addrlen;
  const bool v6 = found->ai_family == AF_INET6;
  freeaddrinfo(found);
  for (int i = 0; i < sockets; ++i) {
    auto socket = heartbeat::UdpSocket::Bind(v6 ? "::" : "0.0.0.0", 0);
    if (!socket.ok()) return socket.status();
    d->sockets_.push_back(std::make_unique<heartbeat::UdpSocket>(*std::move(socket)));
  }
  for (size_t i = 0; i < d->sockets_.size(); ++i) {
    const heartbeat::UdpSocket* socket = d->sockets_[i].get();
    SimDatagrams* self = d.get();
    d->threads_.emplace_back([self, socket, i] {
      pthread_setname_np(pthread_self(), absl::StrCat("rdzv-udp-", i).c_str());
      self->ReceiveLoop(socket);
    });
  }
  return d;
}

SimDatagrams::~SimDatagrams() { Stop(); }

void SimDatagrams::Register(uint64_t session, AckHandler handler) {
  absl::MutexLock lock(&mu_);
  handlers_[session] = std::move(handler);
}

sockaddr_storage SimDatagrams::To(int port) const {
  sockaddr_storage to = coordinator_;
  if (to.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&to)->sin6_port = htons(static_cast<uint16_t>(port));
  } else {
    reinterpret_cast<sockaddr_in*>(&to)->sin_port = htons(static_cast<uint16_t>(port));
  }
  return to;
}

SimDatagrams::Outbox::Pending::Pending()
    : datagrams(kBatch), to(kBatch), iov(kBatch), messages(kBatch) {
  for (size_t i = 0; i < kBatch; ++i) {
    iov[i] = {datagrams[i].data(), datagrams[i].size()};
    messages[i].msg_hdr.msg_iov = &iov[i];
    messages[i].msg_hdr.msg_iovlen = 1;
    messages[i].msg_hdr.msg_name = &to[i];
  }
}

SimDatagrams::Outbox::Outbox(SimDatagrams& datagrams)
    : datagrams_(datagrams), pending_(datagrams.sockets_.size()) {}

SimDatagrams::Outbox::~Outbox() { Flush(); }

void SimDatagrams::Outbox::Add(int shard, int port, const heartbeat::Datagram& datagram) {
  const size_t socket = datagrams_.SocketOf(shard);
  Pending& pending = pending_[socket];
  pending.datagrams[pending.count] = datagram;
  pending.to[pending.count] = datagrams_.To(port);
  pending.messages[pending.count].msg_hdr.msg_namelen = datagrams_.coordinator_length_;
  if (++pending.count == kBatch) FlushSocket(socket);
}

void SimDatagrams::Outbox::Flush() {
  for (size_t socket = 0; socket < pending_.size(); ++socket) FlushSocket(socket);
}

void SimDatagrams::Outbox::FlushSocket(size_t socket) {
  Pending& pending = pending_[socket];
  // Datagrams the kernel refuses are lost, as on a network.
  for (size_t sent = 0; sent < pending.count;) {
    const int k = sendmmsg(datagrams_.sockets_[socket]->fd(), pending.messages.data() + sent,
                           static_cast<unsigned int>(pending.count - sent), MSG_DONTWAIT);
    if (k <= 0) break;
    sent += static_cast<size_t>(k);
  }
  pending.count = 0;
}

void SimDatagrams::SendNow(int shard, int port, absl::string_view bytes) const {
  const sockaddr_storage to = To(port);
  sendto(sockets_[SocketOf(shard)]->fd(), bytes.data(), bytes.size(), MSG_DONTWAIT,
         reinterpret_cast<const sockaddr*>(&to), coordinator_length_);
}

void SimDatagrams::Stop() {
  if (stopping_.exchange(true)) return;
  for (const auto& socket : sockets_) socket->ShutdownReads();
  for (std::thread& thread : threads_) thread.join();
}

void SimDatagrams::ReceiveLoop(const heartbeat::UdpSocket* socket) {
  // One byte more than a datagram: a longer one is seen as too long, not cut.
  std::vector<std::array<char, heartbeat::kDatagramSize + 1>> buffers(kBatch);
  std::vector<iovec> iov(kBatch);
  std::vector<mmsghdr> messages(kBatch);
  for (size_t i = 0; i < kBatch; ++i) {  // recvmmsg sets only msg_len (no addresses asked)
    iov[i] = {buffers[i].data(), buffers[i].size()};
    messages[i].msg_hdr.msg_iov = &iov[i];
    messages[i].msg_hdr.msg_iovlen = 1;
  }
  std::vector<std::pair<AckHandler, absl::string_view>> ready;
  while (!stopping_.load()) {
    const int n = recvmmsg(socket->fd(), messages.data(), kBatch, MSG_WAITFORONE, nullptr);
    if (n <= 0) continue;  // shut down (Stop), or a signal
    ready.clear();
    {
      absl::MutexLock lock(&mu_);
      for (int i = 0; i < n; ++i) {
        const absl::string_view bytes(buffers[i].data(), messages[i].msg_len);
        auto session = heartbeat::PeekSession(bytes);
        if (!session.ok()) continue;
        auto it = handlers_.find(*session);
        if (it == handlers_.end()) continue;
        ready.emplace_back(it->second, bytes);
      }
    }
    for (auto& [handler, bytes] : ready) handler(bytes);
  }
}

}  // namespace ddp::rdzv_sim
