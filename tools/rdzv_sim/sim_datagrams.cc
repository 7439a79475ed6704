#include "tools/rdzv_sim/sim_datagrams.h"

#include <netdb.h>
#include <pthread.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp::rdzv_sim {

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

void SimDatagrams::Send(int shard, int port, const heartbeat::Datagram& datagram) {
  sockaddr_storage to = coordinator_;
  if (to.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&to)->sin6_port = htons(static_cast<uint16_t>(port));
  } else {
    reinterpret_cast<sockaddr_in*>(&to)->sin_port = htons(static_cast<uint16_t>(port));
  }
  const heartbeat::UdpSocket& socket = *sockets_[static_cast<size_t>(shard) % sockets_.size()];
  // A datagram the kernel refuses is lost, as on a network.
  sendto(socket.fd(), datagram.data(), datagram.size(), MSG_DONTWAIT,
         reinterpret_cast<const sockaddr*>(&to), coordinator_length_);
}

void SimDatagrams::Stop() {
  if (stopping_.exchange(true)) return;
  for (const auto& socket : sockets_) socket->ShutdownReads();
  for (std::thread& thread : threads_) thread.join();
}

void SimDatagrams::ReceiveLoop(const heartbeat::UdpSocket* socket) {
  char buffer[heartbeat::kDatagramSize + 1];
  while (!stopping_.load()) {
    const ssize_t n = recv(socket->fd(), buffer, sizeof(buffer), 0);
    if (n <= 0) continue;  // shut down (Stop), or a signal
    const absl::string_view bytes(buffer, static_cast<size_t>(n));
    auto session = heartbeat::PeekSession(bytes);
    if (!session.ok()) continue;
    AckHandler handler;
    {
      absl::MutexLock lock(&mu_);
      auto it = handlers_.find(*session);
      if (it == handlers_.end()) continue;
      handler = it->second;
    }
    handler(bytes);
  }
}

}  // namespace ddp::rdzv_sim
