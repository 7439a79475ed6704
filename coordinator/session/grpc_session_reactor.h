#ifndef DDP_COORDINATOR_SESSION_GRPC_SESSION_REACTOR_H_
#define DDP_COORDINATOR_SESSION_GRPC_SESSION_REACTOR_H_

// The server side of one agent's Session stream (session.proto).
//
//   open --Register ok--> registered --Leave--> finished OK
//     |                      |
//     | other message:       | refused message (ABORTED when fenced,
//     | FAILED_PRECONDITION  | INVALID_ARGUMENT, ...): finished with it
//     | "register first"     |
//     +----------------------+-- stream broken / cancelled / agent closed,
//                                replaced by a newer registration of the node
//                                (ABORTED), agent not reading
//                                (RESOURCE_EXHAUSTED): finished
//
// The first message must be Register; the reply is Registered, the first
// message the core queues for the session (before any message the registration
// produced), sent like them once the registration is durable.
// Every later message carries a NodeHeader naming the stream's job, node and
// incarnation; the core fences it. Any error ends the stream with that status:
// the agent re-registers (same incarnation: the session resumes and the core
// re-sends what the node waits for; after ABORTED: kill the workers, new
// incarnation).
//
// Outbound messages come from the commit loop's delivery thread through the
// SessionSink; at most
// one Write is in flight and at most max_queued_messages wait, so an agent that
// stops reading is disconnected rather than growing memory. When the stream
// ends without a Leave the core learns it through StreamClosed (unless a newer
// stream of the node already took over).
//
// Heartbeats over UDP: with options.heartbeat_endpoint, Register opens a
// session there and Registered names it (heartbeat_channel); it is closed
// before the core learns that the stream ended, so heartbeats count only while
// the stream is open. The session's StreamCursor counts the messages handled
// after Register (each under the cursor's lock), so that the endpoint takes a
// states datagram's worker states only at the point of the stream where the
// agent made it.
//
// Transport: the gRPC stream it reads and writes is a SessionTransport (the
// callback API's reactor, or an async-API stream over one of several
// completion queues, async_session_calls.h), which forwards the stream's
// events here and owns this object.
// Lifecycle: created by the transport when the call starts; OnDone is the
// last event, after which the transport destroys it.
// Thread-safety: write-side state is guarded by the sink's mutex; read-side
// state (registration) is touched only by OnReadDone (one read in flight at a
// time) and by OnDone, which gRPC runs after every other reaction. The sink's
// mutex is never held while calling the registry or the router; the cursor's
// (StreamCursor, with heartbeats over UDP) is held while a message is handled,
// registry calls included, and the endpoint only ever tries it.

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/rpc/stream_write_gate.h"
#include "coordinator/session/grpc_session_service.h"
#include "coordinator/session/rendezvous_service.h"
#include "coordinator/session/session_router.h"
#include "ddp/v1/session.grpc.pb.h"

namespace ddp::session {

// A heartbeat's worker states and progress reports (Heartbeat.workers) to the
// core, as a stream Heartbeat and a states datagram hand them over; checks
// them against the core's limits (INVALID_ARGUMENT naming the bad value).
absl::Status ReportWorkerStates(RendezvousService& rendezvous, const rendezvous::NodeRef& ref,
                                const v1::Heartbeat& heartbeat);

// The operations a session starts on its stream: those of
// grpc::ServerBidiReactor<ByteBuffer, ByteBuffer>. At most one read and one
// write in flight; StartWrite and Finish may be called from any thread, and
// must not run the session's events inline.
class SessionTransport {
 public:
  virtual ~SessionTransport() = default;
  virtual void StartRead(grpc::ByteBuffer* buffer) = 0;
  virtual void StartWrite(const grpc::ByteBuffer* buffer) = 0;
  virtual void Finish(const grpc::Status& status) = 0;
};

// Reads and writes raw bytes and parses them itself, so that bytes which are
// not an AgentMessage end the stream with INVALID_ARGUMENT naming the method
// (gRPC's typed handler would report a clean end of stream).
class SessionReactor final {
 public:
  // `identity`: of the stream's bearer token (checked at Register). Starts
  // the first read on `transport`, which must outlive this object.
  SessionReactor(SessionTransport* transport, RendezvousService& rendezvous,
                 const GrpcSessionServiceOptions& options, std::atomic<int>* open_streams,
                 auth::Identity identity);

  // The stream's events, as grpc::ServerBidiReactor's. (The async transport
  // has no OnCancel: a cancelled call fails the read the session keeps
  // pending, which ends the stream the same way.)
  void OnReadDone(bool ok);
  void OnWriteDone(bool ok);
  void OnCancel();
  void OnDone();

 private:
  // What the router holds; forwards to the reactor while it lives.
  class Sink final : public SessionSink {
   public:
    explicit Sink(SessionReactor* reactor) : reactor_(reactor) {}
    void Deliver(const rendezvous::OutboundMessage& message) override;
    void Close(const absl::Status& status) override;

    absl::Mutex mu;
    SessionReactor* reactor_ ABSL_GUARDED_BY(mu);
    // Goes into the session's Registered (set before the core can queue it).
    std::optional<HeartbeatChannelGrant> heartbeat_channel ABSL_GUARDED_BY(mu);
  };

  // Read side.
  absl::Status Handle(const v1::AgentMessage& message);
  absl::Status HandleRegister(const v1::Register& message);
  // The header as a core NodeRef, checked against the registration.
  absl::StatusOr<rendezvous::NodeRef> CheckHeader(const v1::NodeHeader& header) const;

  // Write side.
  void EnqueueLocked(v1::CoordinatorMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sink_->mu);
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sink_->mu);
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sink_->mu);

  SessionTransport* const transport_;
  RendezvousService& rendezvous_;
  const GrpcSessionServiceOptions& options_;
  // Of the stream's bearer token, checked against the job each Register names.
  auth::Identity identity_;
  std::atomic<int>* const open_streams_;
  const std::shared_ptr<Sink> sink_;

  // Read side (see thread-safety above).
  grpc::ByteBuffer incoming_bytes_;
  v1::AgentMessage incoming_;
  bool registered_ = false;
  bool left_ = false;
  std::string job_id_;
  std::string node_id_;
  rendezvous::Incarnation incarnation_ = 0;
  uint64_t heartbeat_session_ = 0;  // of options_.heartbeat_endpoint; 0: none
  // Shared with the endpoint's session; null before Register or without one.
  std::shared_ptr<StreamCursor> cursor_;

  // Write side.
  rpc::StreamWriteGate gate_ ABSL_GUARDED_BY(sink_->mu);
  std::deque<v1::CoordinatorMessage> queue_ ABSL_GUARDED_BY(sink_->mu);
  grpc::ByteBuffer outgoing_ ABSL_GUARDED_BY(sink_->mu);
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_GRPC_SESSION_REACTOR_H_
