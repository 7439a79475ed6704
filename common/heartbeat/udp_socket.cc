#include "common/heartbeat/udp_socket.h"

#include <linux/sock_diag.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ddp::heartbeat {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};

absl::StatusOr<std::unique_ptr<addrinfo, AddrInfoDeleter>> Resolve(std::string host, int port,
                                                                   bool passive) {
  // "[::]" as in a listen address: the brackets are not part of the address.
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("UDP port ", port, " for ", host, " is outside 0..65535"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = passive ? (AI_PASSIVE | AI_NUMERICHOST) : 0;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    const std::string what =
        absl::StrCat("cannot resolve ", host, " (UDP port ", port, "): ", gai_strerror(rc));
    return passive ? absl::InvalidArgumentError(what) : absl::UnavailableError(what);
  }
  return std::unique_ptr<addrinfo, AddrInfoDeleter>(found);
}

}  // namespace

UdpSocket::~UdpSocket() {
  if (fd_ >= 0) close(fd_);
}

UdpSocket::UdpSocket(UdpSocket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

UdpSocket& UdpSocket::operator=(UdpSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

absl::StatusOr<UdpSocket> UdpSocket::Bind(const std::string& address, int port,
                                          int receive_buffer) {
  auto info = Resolve(address, port, /*passive=*/true);
  if (!info.ok()) return info.status();
  const addrinfo* a = info->get();
  UdpSocket socket(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
  if (!socket.valid()) {
    return absl::UnavailableError(absl::StrCat("cannot open a UDP socket: ", strerror(errno)));
  }
  // Root may exceed net.core.rmem_max; others get what it allows.
  if (setsockopt(socket.fd_, SOL_SOCKET, SO_RCVBUFFORCE, &receive_buffer, sizeof(receive_buffer)) !=
      0) {
    setsockopt(socket.fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
  }
  if (::bind(socket.fd_, a->ai_addr, a->ai_addrlen) != 0) {
    const int err = errno;
    const std::string what =
        absl::StrCat("cannot bind UDP ", address, ":", port, ": ", strerror(err));
    return err == EADDRINUSE ? absl::AlreadyExistsError(what) : absl::UnavailableError(what);
  }
  return socket;
}

absl::StatusOr<UdpSocket> UdpSocket::Connect(const std::string& host, int port) {
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("UDP port ", port, " for ", host, " is outside 1..65535"));
  }
  auto info = Resolve(host, port, /*passive=*/false);
  if (!info.ok()) return info.status();
  std::string last_error;
  for (const addrinfo* a = info->get(); a != nullptr; a = a->ai_next) {
    UdpSocket socket(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!socket.valid()) {
      last_error = strerror(errno);
      continue;
    }
    if (::connect(socket.fd_, a->ai_addr, a->ai_addrlen) == 0) return socket;
    last_error = strerror(errno);
  }
  return absl::UnavailableError(
      absl::StrCat("cannot open UDP to ", host, ":", port, ": ", last_error));
}

int UdpSocket::local_port() const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

int UdpSocket::receive_buffer_bytes() const {
  int bytes = 0;
  socklen_t length = sizeof(bytes);
  if (getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, &length) != 0) return 0;
  return bytes;
}

int64_t UdpSocket::dropped_on_arrival() const {
  uint32_t meminfo[SK_MEMINFO_VARS] = {};
  socklen_t length = sizeof(meminfo);
  if (getsockopt(fd_, SOL_SOCKET, SO_MEMINFO, meminfo, &length) != 0 ||
      length < (SK_MEMINFO_DROPS + 1) * sizeof(uint32_t)) {
    return -1;
  }
  return meminfo[SK_MEMINFO_DROPS];
}

bool UdpSocket::Send(const void* data, size_t size) const {
  return ::send(fd_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(size);
}

int UdpSocket::Receive(void* data, size_t capacity, absl::Duration timeout) const {
  pollfd p{fd_, POLLIN, 0};
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
  if (::poll(&p, 1, ms) <= 0) return -1;
  const ssize_t n = ::recv(fd_, data, capacity, MSG_DONTWAIT);
  return n < 0 ? -1 : static_cast<int>(n);
}

void UdpSocket::ShutdownReads() const { ::shutdown(fd_, SHUT_RD); }

}  // namespace ddp::heartbeat
