#ifndef DDP_TOOLS_RDZV_SIM_GRPC_AGENT_STREAM_H_
#define DDP_TOOLS_RDZV_SIM_GRPC_AGENT_STREAM_H_

// One simulated agent's Session stream over the gRPC async API, on one of
// several completion queues (AsyncClientBidi; no thread per stream): registers, answers the
// coordinator's orders through its SimAgent, and sends heartbeats when a pacing thread asks it to.
//
// Writes: at most one in flight; the rest wait in a queue. A heartbeat asked
// for while the previous one is still queued is dropped (counted), so a slow
// stream does not grow memory. gRPC may run OnWriteDone inline inside
// StartWrite, so StartWrite is never called with the mutex held.
// A hold keeps the stream open for writes from pacing threads; it is released
// once writes stop and no write is in flight, after which gRPC may call
// OnDone. Writes stop when the stream breaks, or after JobFinished /
// NodeDismissed: the agent then half-closes (WritesDone) and the coordinator
// ends the stream.
//
// Lifecycle: Start -> ... -> OnDone (tracker told); the owner destroys it only
// after the tracker counted every stream done.
// Thread-safety: thread-safe.

#include <atomic>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/agent/session_core.h"
#include "common/clock.h"
#include "common/heartbeat/heartbeat_datagram.h"
#include "ddp/v1/session.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/rdzv_sim/async_client_bidi.h"
#include "tools/rdzv_sim/progress_tracker.h"
#include "tools/rdzv_sim/sim_agent.h"
#include "tools/rdzv_sim/sim_datagrams.h"

namespace ddp::rdzv_sim {

struct AgentStreamCounters {
  std::atomic<int64_t> heartbeats_sent{0};
  std::atomic<int64_t> heartbeats_dropped{0};
  std::atomic<int64_t> heartbeat_datagrams{0};  // of heartbeats_sent
};

class GrpcAgentStream final : public AsyncClientBidi<v1::AgentMessage, v1::CoordinatorMessage> {
 public:
  // `ack_heartbeats`: heartbeats ask for acknowledgements when the lease
  // needs renewing (SessionCore::AckDue), as ddp-client's do.
  // `datagrams` (nullable): heartbeats over UDP when the coordinator grants a
  // channel, on socket `shard`.
  GrpcAgentStream(SimAgentIdentity identity, v1::JobSettings settings, ProgressTracker& tracker,
                  AgentStreamCounters& counters, const Clock& clock, bool ack_heartbeats,
                  SimDatagrams* datagrams = nullptr, int shard = 0);

  // Opens the stream on `queue` (AsyncClientQueues) and sends Register.
  void Start(v1::SessionService::Stub& stub, grpc::CompletionQueue* queue);
  // Queues a Heartbeat if the agent is registered and none is queued, or
  // sends it as a datagram through `outbox` (SessionCore::RouteHeartbeat: the
  // workers' states as a states datagram where the coordinator takes them,
  // else on the stream with their lease renewal as a datagram).
  void SendHeartbeat(SimDatagrams::Outbox& outbox);
  // Reports worker local_rank 0 exited with `exit_code`.
  // Possible errors: FAILED_PRECONDITION unless the agent is running.
  absl::Status SendWorkerExited(int exit_code);
  // Ends the stream (teardown); it then finishes with CANCELLED.
  void Cancel();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  enum class NextOp { kNone, kWrite, kWritesDone };

  void Enqueue(v1::AgentMessage message);
  // Under mu_: what the caller must start after unlocking (StartWrite of
  // writing_, or StartWritesDone once the queue drained after a close).
  NextOp TakeNextOpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartOp(NextOp op);
  // Half-closes the stream after the queued messages (JobFinished).
  void CloseWrites();
  // Under mu_: whether the caller must RemoveHold() after unlocking.
  bool TakeHoldReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopWritesAndMaybeRelease();
  void Handle(const v1::CoordinatorMessage& message);
  // An ack datagram naming this agent's session (SimDatagrams' thread).
  void OnAckDatagram(absl::string_view bytes);
  // The current heartbeat channel's key, prepared once per channel; null
  // without a channel.
  heartbeat::DatagramKey* DatagramKeyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(const absl::Status& status);

  const bool ack_heartbeats_;
  SimDatagrams* const datagrams_;
  const int shard_;
  ProgressTracker& tracker_;
  AgentStreamCounters& counters_;
  const Clock& clock_;
  v1::CoordinatorMessage incoming_;  // one read in flight at a time

  absl::Mutex mu_;
  SimAgent agent_ ABSL_GUARDED_BY(mu_);
  // The messages' form and the heartbeat sequence (the agents' shared
  // protocol core); SimAgent keeps the simulated agent's phase.
  client::SessionCore core_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::AgentMessage> queue_ ABSL_GUARDED_BY(mu_);
  // Owned by whoever set write_in_flight_ (StartWrite runs unlocked).
  v1::AgentMessage writing_;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool heartbeat_queued_ ABSL_GUARDED_BY(mu_) = false;
  // The generation whose running workers' states were sent (-1: none).
  int64_t states_sent_for_ ABSL_GUARDED_BY(mu_) = -1;
  // The last states datagram (0: none waiting for its ack) and its
  // generation's: the states count as sent once an ack says they were taken.
  uint64_t states_datagram_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t states_datagram_generation_ ABSL_GUARDED_BY(mu_) = -1;
  // Messages queued for the stream after Register: a states datagram's mark.
  uint64_t stream_messages_ ABSL_GUARDED_BY(mu_) = 0;
  bool writes_stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool close_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_by_coordinator_ ABSL_GUARDED_BY(mu_) = false;
  // DatagramKeyLocked's cache: the key of channel session `key_session_`.
  std::optional<heartbeat::DatagramKey> key_ ABSL_GUARDED_BY(mu_);
  uint64_t key_session_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ddp::rdzv_sim

#endif  // DDP_TOOLS_RDZV_SIM_GRPC_AGENT_STREAM_H_
