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
  // One datagram (a states datagram: one per agent and generation) to the
  // coordinator's `port` at once, on socket `shard`; one the kernel refuses
  // is lost, as on a network.
  void SendNow(int shard, int port, absl::string_view bytes) const;
  void Stop();

  // Datagrams one thread sends in a burst (a pacer's due heartbeats), one
  // sendmmsg per socket and 64 datagrams instead of one sendto each: the
  // simulator's share of the machine, not the coordinator's cost per datagram.
  // Thread-safety: one thread; the SimDatagrams must outlive it.
  class Outbox {
   public:
    explicit Outbox(SimDatagrams& datagrams);
    ~Outbox();  // Flush()
    Outbox(const Outbox&) = delete;
    Outbox& operator=(const Outbox&) = delete;
    // To the coordinator's `port`, on socket `shard` (any int); goes out at
    // the latest with the next Flush (a datagram the kernel refuses is lost,
    // as on a network).
    void Add(int shard, int port, const heartbeat::Datagram& datagram);
    void Flush();

   private:
    // Up to kBatch datagrams for one socket, with the headers sendmmsg reads
    // (set up once: each entry points at its own datagram and address).
    struct Pending {
      Pending();
      Pending(const Pending&) = delete;  // the headers point into its own vectors
      Pending& operator=(const Pending&) = delete;
      std::vector<heartbeat::Datagram> datagrams;
      std::vector<sockaddr_storage> to;
      std::vector<iovec> iov;
      std::vector<mmsghdr> messages;
      size_t count = 0;
    };
    void FlushSocket(size_t socket);
    SimDatagrams& datagrams_;
    std::vector<Pending> pending_;  // per socket
  };

 private:
  SimDatagrams() = default;
  void ReceiveLoop(const heartbeat::UdpSocket* socket);
  // The coordinator's address with `port`.
  sockaddr_storage To(int port) const;
  size_t SocketOf(int shard) const { return static_cast<size_t>(shard) % sockets_.size(); }

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
