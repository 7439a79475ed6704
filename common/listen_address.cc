#include "common/listen_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ddp {

absl::Status DiagnoseListen(const std::string& host, int port, const std::string& what,
                            const std::string& flag, ListenTransport transport) {
  const bool udp = transport == ListenTransport::kUdp;
  absl::string_view name = host;
  if (absl::ConsumePrefix(&name, "[")) absl::ConsumeSuffix(&name, "]");
  const std::string address = absl::StrCat(host, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = udp ? SOCK_DGRAM : SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  const int rc = getaddrinfo(std::string(name).c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for ", what, " on ", address,
                                               ": the address does not resolve (", gai_strerror(rc),
                                               "); fix --bind"));
  }
  int error = 0;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const bool bound = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    error = bound ? 0 : errno;
    close(fd);
    if (bound || error == EADDRINUSE) break;
  }
  freeaddrinfo(found);
  if (error == 0) return absl::OkStatus();
  if (error == EADDRINUSE) {
    return absl::AlreadyExistsError(absl::StrCat(
        "cannot listen for ", what, " on ", address,
        ": the address is already in use (another coordinator, or another program: see `ss ",
        udp ? "-lunp" : "-ltnp", "`); stop it or pick another ", flag));
  }
  return absl::UnavailableError(absl::StrCat("cannot listen for ", what, " on ", address, ": ",
                                             std::strerror(error),
                                             "; check --bind (is the address local?) and ", flag));
}

}  // namespace ddp
