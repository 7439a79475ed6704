#ifndef DDP_COMMON_TESTING_HELD_SOCKET_H_
#define DDP_COMMON_TESTING_HELD_SOCKET_H_

// A socket a test holds on a port the kernel picked, to make that port busy
// (a "port taken" test) or to stand in for a server that accepts and says
// nothing. Closed when it goes out of scope.
//
// Thread-safety: one owner.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <utility>

namespace ddp::testing {

class HeldSocket {
 public:
  struct Options {
    int type = SOCK_STREAM;  // or SOCK_DGRAM
    // INADDR_LOOPBACK or INADDR_ANY (host order).
    uint32_t address = INADDR_LOOPBACK;
    // A stream socket listens at once unless told not to (-1); the backlog
    // otherwise.
    int backlog = 16;
  };

  HeldSocket() : HeldSocket(Options{}) {}
  explicit HeldSocket(Options options) {
    fd_ = socket(AF_INET, options.type | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(options.address);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return;
    if (options.type == SOCK_STREAM && options.backlog >= 0 && listen(fd_, options.backlog) != 0)
      return;
    socklen_t length = sizeof(address);
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) return;
    port_ = ntohs(address.sin_port);
  }
  HeldSocket(HeldSocket&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), port_(std::exchange(other.port_, 0)) {}
  HeldSocket& operator=(HeldSocket&&) = delete;
  HeldSocket(const HeldSocket&) = delete;
  ~HeldSocket() { Close(); }

  // Whether it holds its port (a test asserts this first).
  bool ok() const { return fd_ >= 0 && port_ > 0; }
  int fd() const { return fd_; }
  int port() const { return port_; }
  // Lets the port go (a later bind may take it).
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace ddp::testing

#endif  // DDP_COMMON_TESTING_HELD_SOCKET_H_
