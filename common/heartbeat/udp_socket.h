#ifndef DDP_COMMON_HEARTBEAT_UDP_SOCKET_H_
#define DDP_COMMON_HEARTBEAT_UDP_SOCKET_H_

// A UDP socket for heartbeat datagrams: bound (the coordinator's endpoint) or
// connected to one peer (an agent). IPv4 and IPv6; the descriptor is closed
// with the object.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ddp::heartbeat {

class UdpSocket {
 public:
  UdpSocket() = default;
  ~UdpSocket();
  UdpSocket(UdpSocket&& other) noexcept;
  UdpSocket& operator=(UdpSocket&& other) noexcept;
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;

  // Bound to `address` ("0.0.0.0", "::" or "[::]", an interface's address) and `port`
  // (0: any free one). The receive buffer is raised to `receive_buffer` bytes
  // where the system allows (a burst of heartbeats from every agent at once).
  // Errors: INVALID_ARGUMENT (address), ALREADY_EXISTS (port in use),
  // UNAVAILABLE (other socket errors), each naming the address and port.
  static absl::StatusOr<UdpSocket> Bind(const std::string& address, int port,
                                        int receive_buffer = 8 << 20);
  // Connected to `host` (a name or an address) and `port`: Send and Receive
  // talk to that peer only (the kernel drops datagrams from anyone else).
  // Errors: INVALID_ARGUMENT (port out of range), UNAVAILABLE (cannot resolve
  // or connect), naming the host and port.
  static absl::StatusOr<UdpSocket> Connect(const std::string& host, int port);

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // The bound local port.
  int local_port() const;
  // The kernel's receive buffer as granted (SO_RCVBUF: twice what the socket
  // may hold in data, the kernel's accounting).
  int receive_buffer_bytes() const;
  // Datagrams the kernel dropped on arrival since the socket opened, most of
  // them because its receive queue was full (the reader fell behind):
  // SO_MEMINFO's SK_MEMINFO_DROPS, a 32-bit count that wraps. -1 where the
  // kernel does not say.
  int64_t dropped_on_arrival() const;
  // Connected sockets: sends one datagram; false when the kernel refused it
  // (the caller counts it as lost: heartbeats are idempotent).
  bool Send(const void* data, size_t size) const;
  // Connected sockets: one datagram of at most `capacity` bytes into `data`,
  // waiting at most `timeout`; its size, or -1 on timeout or error.
  int Receive(void* data, size_t capacity, absl::Duration timeout) const;
  // Wakes a thread blocked in Receive (or recvmmsg) on this socket, which
  // then returns at once, now and for good.
  void ShutdownReads() const;

 private:
  explicit UdpSocket(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace ddp::heartbeat

#endif  // DDP_COMMON_HEARTBEAT_UDP_SOCKET_H_
