#ifndef DDP_COORDINATOR_SESSION_UDP_HEARTBEAT_ENDPOINT_H_
#define DDP_COORDINATOR_SESSION_UDP_HEARTBEAT_ENDPOINT_H_

// Heartbeats over UDP (coordinator --heartbeat-udp; the datagram format is
// common/heartbeat/heartbeat_datagram.h): a transport for the one message an
// agent sends every heartbeat interval, at a few microseconds of coordinator
// CPU where a gRPC stream message costs tens (docs/benchmarks.md).
//
//   SessionReactor, at Register:  Open(ref) -> {port, session id, key}, sent
//                                 in Registered.heartbeat_channel
//   agent:                        heartbeat datagrams; those whose worker
//                                 states changed as states datagrams
//   this endpoint, per datagram:  checks size, MAC, session and sequence
//                                 (later than the session's last), then
//                                 `heartbeat(ref)` as a stream Heartbeat
//                                 would, and for a states datagram
//                                 `states(ref, payload)` at the point of the
//                                 stream it was made at (below); answers
//                                 with an ack datagram when asked
//                                 (HeartbeatAck: the lease; and whether the
//                                 states were taken)
//   SessionReactor, stream ended: Close(session) BEFORE the core hears of it,
//                                 so no datagram marks a node whose stream
//                                 closed as connected again
//
// A datagram the core refuses (ABORTED: fenced, ...) closes the session here
// and is answered with a refused ack: the agent heartbeats on its stream,
// where the same refusal ends the stream with that status. Datagrams that
// are malformed, forged, replayed or of an unknown session are dropped and
// counted (no answer: an unknown session has no key to sign one).
//
// Worker states in datagrams keep the stream's order. A states datagram
// carries its stream mark: how many messages the agent had written on its
// stream before it. The session's reader counts the messages it has handled
// in the session's StreamCursor, under the cursor's lock; the endpoint takes
// a datagram's states only when it gets that lock at once and the count is
// the mark. A datagram ahead of the stream (its messages not handled yet)
// or behind it (a later message, which may be a WorkerExited, handled
// first) is acked without "taken", and the agent sends its current states
// again with its next heartbeat. So the core sees a node's reports in the
// order the agent made them, as on the stream.
//
// Liveness stays the stream's: heartbeats count only while the session's
// stream is open (Open..Close); the lease is the same (acks carry the
// running generation, and the agent renews from the send time it kept).
//
// Datagrams the kernel drops because this thread fell behind (a full
// receive queue) are not lost silently: the core's tick reads their count
// (TakeOverflow) and lets no node's silence count meanwhile.
//
// Thread: "udp-heartbeats" receives and answers in batches (recvmmsg,
// sendmmsg). Thread-safety: thread-safe. `heartbeat` runs under the
// endpoint's lock (that is what orders it before Close) and must not call
// Open or Close.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/heartbeat/heartbeat_datagram.h"
#include "common/heartbeat/udp_socket.h"
#include "coordinator/rendezvous/job_types.h"

namespace ddp::session {

// What Registered.heartbeat_channel tells the agent.
struct HeartbeatChannelGrant {
  int port = 0;
  uint64_t session = 0;
  std::string key;  // secret: never logged
  bool worker_states = false;  // states datagrams are taken
};

// How far the coordinator has read a session's stream (see above): the
// agent messages after Register its reader has handled. The reader holds
// `mu` while it handles one and counts it.
struct StreamCursor {
  absl::Mutex mu;
  uint64_t handled ABSL_GUARDED_BY(mu) = 0;
};

class UdpHeartbeatEndpoint {
 public:
  // The core's Heartbeat (JobRegistry::Heartbeat): the running generation.
  using Heartbeat =
      std::function<absl::StatusOr<rendezvous::Generation>(const rendezvous::NodeRef&)>;
  // Hands a states datagram's payload (a serialized ddp.v1.Heartbeat with
  // only its workers) to the core as a stream Heartbeat's states would be; an
  // error refuses the channel like a refused heartbeat.
  using States =
      std::function<absl::Status(const rendezvous::NodeRef&, absl::string_view payload)>;
  struct Stats {
    int64_t received = 0;  // datagrams
    int64_t accepted = 0;  // heartbeats the core took
    int64_t acks = 0;      // ack datagrams sent (refusals included)
    int64_t dropped = 0;   // malformed, forged, replayed, unknown session
    int64_t refused = 0;   // the core refused: the session moved to its stream
    int64_t states_taken = 0;    // states datagrams whose states went to the core
    int64_t states_deferred = 0;  // acked without "taken": not at their stream point
    // Dropped by the kernel before this endpoint read them: the receive
    // queue was full (the coordinator fell behind). Counted when
    // TakeOverflow looks.
    int64_t overflowed = 0;
  };

  // Without `states`, states datagrams are not offered (grants say so) and,
  // if sent anyway, never taken.
  explicit UdpHeartbeatEndpoint(Heartbeat heartbeat, States states = nullptr);
  ~UdpHeartbeatEndpoint();  // Stop()
  UdpHeartbeatEndpoint(const UdpHeartbeatEndpoint&) = delete;
  UdpHeartbeatEndpoint& operator=(const UdpHeartbeatEndpoint&) = delete;

  // The receive buffer Start asks for (the kernel grants twice that): about
  // 20,000 datagrams, 150 ms of every agent's heartbeats at 65,536 agents.
  static constexpr int kReceiveBufferBytes = 8 << 20;

  // Binds `address`:`port` (0: any free port) and starts the thread. Once.
  // Errors: UdpSocket::Bind's.
  absl::Status Start(const std::string& address, int port,
                     int receive_buffer_bytes = kReceiveBufferBytes);
  // Stops the thread; Open returns nullopt from then on. Idempotent.
  void Stop();
  // The bound port; 0 before Start or after Stop.
  int port() const { return port_.load(); }

  // A new session for the node `ref` (its generation is ignored: every
  // datagram names its own); nullopt when not running. States datagrams are
  // taken when the endpoint has `states` and `cursor` is set: the cursor of
  // the stream the session belongs to.
  std::optional<HeartbeatChannelGrant> Open(const rendezvous::NodeRef& ref,
                                            std::shared_ptr<StreamCursor> cursor = nullptr);
  // No datagram of `session` reaches the core once this returns.
  void Close(uint64_t session);

  // Datagrams the kernel dropped because the receive queue was full since
  // the previous call (0 before Start, after Stop, or where the kernel does
  // not say). Any of them may have been the heartbeat that kept a node
  // alive: the core's tick asks first and lets no node's silence until now
  // count when this is not 0 (JobRegistryOptions::take_dropped_heartbeats).
  int64_t TakeOverflow();

  Stats stats() const;
  size_t open_sessions() const;

 private:
  struct Session {
    // The node; its generation is the last datagram's (handed to the core
    // as it is: no copy of the ids per heartbeat).
    rendezvous::NodeRef ref;
    heartbeat::DatagramKey key;  // prepared once: checks and acks are cheap
    uint64_t last_sequence = 0;
    std::shared_ptr<StreamCursor> cursor;  // null: states are not taken
  };
  void Loop();
  // A states datagram's states to the core if it is at its stream point;
  // whether they were taken, or the core's refusal.
  absl::StatusOr<bool> TakeStates(Session& session, const heartbeat::StatesDatagram& datagram)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Heartbeat heartbeat_;
  const States states_;
  heartbeat::UdpSocket socket_;
  std::atomic<int> port_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;

  // Held while a datagram is checked and handed to the core, so that Close
  // orders against it.
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Session> sessions_ ABSL_GUARDED_BY(mu_);

  std::atomic<int64_t> received_{0};
  std::atomic<int64_t> accepted_{0};
  std::atomic<int64_t> acks_{0};
  std::atomic<int64_t> dropped_{0};
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> states_taken_{0};
  std::atomic<int64_t> states_deferred_{0};
  std::atomic<int64_t> overflowed_{0};
  absl::Mutex overflow_mu_;  // TakeOverflow's: one reader of the kernel count at a time
  int64_t kernel_drops_seen_ ABSL_GUARDED_BY(overflow_mu_) = 0;
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_UDP_HEARTBEAT_ENDPOINT_H_
