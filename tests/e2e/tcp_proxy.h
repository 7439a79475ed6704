#ifndef DDP_TESTS_E2E_TCP_PROXY_H_
#define DDP_TESTS_E2E_TCP_PROXY_H_

// A loopback TCP proxy that can cut the network silently, as a partition
// does: while partitioned it neither reads nor writes nor closes anything, so
// both ends see only silence (no FIN, no RST) and bytes wait in the kernel's
// buffers until the partition heals. Needs no root (unlike a network
// namespace), which is why the partition tests use it.
//
// Thread-safety: thread-safe; one "tcp-proxy" thread pumps every connection.

#include <atomic>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace ddp::testing {

class TcpProxy {
 public:
  // Listens on 127.0.0.1:0 and forwards each connection to 127.0.0.1:target_port.
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  std::string address() const;  // "127.0.0.1:PORT"
  void SetPartitioned(bool partitioned) { partitioned_ = partitioned; }

 private:
  TcpProxy(int listen_fd, int port, int target_port);
  void Loop();

  const int listen_fd_;
  const int port_;
  const int target_port_;
  std::atomic<bool> partitioned_{false};
  std::atomic<bool> quit_{false};
  std::thread thread_;
};

}  // namespace ddp::testing

#endif  // DDP_TESTS_E2E_TCP_PROXY_H_
