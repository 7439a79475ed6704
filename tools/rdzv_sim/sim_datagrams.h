#ifndef DDP_TOOLS_RDZV_SIM_SIM_DATAGRAMS_H_
#define DDP_TOOLS_RDZV_SIM_SIM_DATAGRAMS_H_

// The simulated agents' heartbeats over UDP (coordinator --heartbeat-udp): a
// few unconnected sockets shared by every agent (a real agent has one of its
// own; the coordinator's cost per datagram is the same), each with a thread
// that hands ack datagrams to the agent whose session they name.
//
// Thread-safety: thread-safe. Stop (or the destructor) before the agents go.

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/heartbeat/heartbeat_datagram.h"
#include "common/heartbeat/udp_socket.h"

namespace ddp::rdzv_sim {

class SimDatagrams {
 public:
  // Receives one ack datagram (unverified bytes) for a registered session.
  using AckHandler = std::function<void(absl::string_view bytes)>;

  // `host`: the coordinator's (an address or a name), where datagrams go.
  // Errors: INVALID_ARGUMENT / UNAVAILABLE naming the host.
  static absl::StatusOr<std::unique_ptr<SimDatagrams>> Create(const std::string& host, int sockets);
  ~SimDatagrams();  // Stop()

  // Acks naming `session` go to `handler` from now on.
  void Register(uint64_t session, AckHandler handler);
  // Sends on socket `shard` (any int) to the coordinator's `port`.
  void Send(int shard, int port, const heartbeat::Datagram& datagram);
  void Stop();

 private:
  SimDatagrams() = default;
  void ReceiveLoop(const heartbeat::UdpSocket* socket);

  sockaddr_storage coordinator_{};
  socklen_t coordinator_length_ = 0;
  std::vector<std::unique_ptr<heartbeat::UdpSocket>> sockets_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, AckHandler> handlers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::rdzv_sim

#endif  // DDP_TOOLS_RDZV_SIM_SIM_DATAGRAMS_H_
