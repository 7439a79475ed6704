#include "client/free_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ddp::client {
namespace {

struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family = AF_INET;
};

bool MakeAddress(const std::string& ip, int port, Address* out) {
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out->storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out->storage);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    out->length = sizeof(sockaddr_in);
    out->family = AF_INET;
    return true;
  }
  if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    out->length = sizeof(sockaddr_in6);
    out->family = AF_INET6;
    return true;
  }
  return false;
}

// Binds `port` (0 = any); returns the bound port or -1 with errno set.
int TryBind(const std::string& ip, int port) {
  Address address;
  if (!MakeAddress(ip, port, &address)) {
    errno = EINVAL;
    return -1;
  }
  const int fd = socket(address.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int bound = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address.storage), address.length) == 0) {
    sockaddr_storage actual{};
    socklen_t length = sizeof(actual);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&actual), &length) == 0) {
      bound = actual.ss_family == AF_INET6
                  ? ntohs(reinterpret_cast<sockaddr_in6*>(&actual)->sin6_port)
                  : ntohs(reinterpret_cast<sockaddr_in*>(&actual)->sin_port);
    }
  }
  const int saved = errno;
  close(fd);
  errno = saved;
  return bound;
}

int EphemeralLow() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768, high = 60999;
  if (!(range >> low >> high)) low = 32768;
  return low;
}

}  // namespace

bool PortIsFree(const std::string& bind_address, int port) {
  return port > 0 && TryBind(bind_address, port) == port;
}

absl::StatusOr<int> PickFreePort(const FreePortOptions& options) {
  Address probe;
  if (!MakeAddress(options.bind_address, 0, &probe)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bind address '", options.bind_address.substr(0, 64), "' is not an IPv4 or IPv6 literal"));
  }
  const int high = EphemeralLow() - 1;
  if (options.range_low > 0 && options.range_low < high) {
    std::random_device device;
    std::mt19937 rng(device());
    std::uniform_int_distribution<int> pick(options.range_low, high);
    for (int i = 0; i < options.attempts; ++i) {
      const int port = pick(rng);
      if (TryBind(options.bind_address, port) == port) return port;
    }
  }
  const int port = TryBind(options.bind_address, 0);
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot bind a TCP port on ", options.bind_address, ": ", strerror(errno)));
  }
  return port;
}

}  // namespace ddp::client
