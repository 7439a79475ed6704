#include "client/prewarm/listener_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"

namespace ddp::client {
namespace {

constexpr absl::Duration kRetryPeriod = absl::Milliseconds(2);
constexpr absl::Duration kMaxTry = absl::Milliseconds(200);

// One non-blocking connect to `address`, bounded by `bound`.
bool ConnectOnce(const addrinfo& address, absl::Duration bound) {
  const int fd = socket(address.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool connected = connect(fd, address.ai_addr, address.ai_addrlen) == 0;
  if (!connected && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(bound)) + 1) == 1) {
      int error = 0;
      socklen_t length = sizeof(error);
      connected = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
    }
  }
  close(fd);
  return connected;
}

}  // namespace

bool AwaitListener(const std::string& host, int port, absl::Duration timeout) {
  // Real connects to a real socket: on CLOCK_MONOTONIC, which a wall-clock
  // step does not cut short or prolong.
  const Clock& monotonic = MonotonicClock::Get();
  const absl::Time deadline = monotonic.Now() + timeout;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  if (getaddrinfo(host.c_str(), absl::StrCat(port).c_str(), &hints, &addresses) != 0) {
    return false;
  }
  bool accepted = false;
  while (!accepted) {
    for (const addrinfo* a = addresses; a != nullptr && !accepted; a = a->ai_next) {
      accepted = ConnectOnce(*a, std::min(kMaxTry, deadline - monotonic.Now()));
    }
    if (accepted || monotonic.Now() + kRetryPeriod >= deadline) break;
    absl::SleepFor(kRetryPeriod);
  }
  freeaddrinfo(addresses);
  return accepted;
}

}  // namespace ddp::client
