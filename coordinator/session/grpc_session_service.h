#ifndef DDP_COORDINATOR_SESSION_GRPC_SESSION_SERVICE_H_
#define DDP_COORDINATOR_SESSION_GRPC_SESSION_SERVICE_H_

// ddp.v1.SessionService over the gRPC callback API (--session-queues 0): one
// SessionReactor per agent stream (no thread per stream), carried by a
// callback reactor. The default transport is AsyncSessionCalls
// (async_session_calls.h); the options below serve both. See
// grpc_session_reactor.h for the per-stream protocol.
//
// Thread-safety: thread-safe. The RendezvousService must outlive the service,
// and the service must outlive the grpc::Server it is registered with.

#include <atomic>

#include "coordinator/auth/authorizer.h"
#include "coordinator/fleet/node_ledger.h"
#include "coordinator/session/rendezvous_service.h"
#include "coordinator/session/stack_collector.h"
#include "coordinator/session/udp_heartbeat_endpoint.h"
#include "ddp/v1/session.grpc.pb.h"

namespace ddp::session {

struct GrpcSessionServiceOptions {
  // Coordinator messages queued for one agent beyond the one being written; an
  // agent that does not read is disconnected (RESOURCE_EXHAUSTED) instead.
  int max_queued_messages = 64;
  // Checks the bearer token of each stream at Register (null: no checks).
  const auth::Authorizer* authorizer = nullptr;
  // > 0: the sessions run on the async API over at least this many completion
  // queues (AsyncSessionCalls on rpc::AsyncStreamQueues); 0: on the callback API (GrpcSessionService).
  int completion_queues = 0;
  // With completion_queues > 0: streams per queue; when every open queue holds
  // this many, twice as many open, up to 64 (rpc::StreamQueuePlacement); 0:
  // exactly completion_queues.
  int streams_per_completion_queue = 2048;
  // Offers each session heartbeats over UDP (Registered.heartbeat_channel)
  // while it runs; null: heartbeats on the stream only.
  UdpHeartbeatEndpoint* heartbeat_endpoint = nullptr;
  // Takes the agents' Stacks answers (GetJobStacks); null: they are dropped.
  StackCollector* stack_collector = nullptr;
  // The fleet's ledger: every Register passes NodeLedger::Admit first (a
  // cordoned or quarantined node, or a failed health check, is refused);
  // null: every node is admitted.
  fleet::NodeLedger* fleet = nullptr;
};

class GrpcSessionService final
    : public v1::SessionService::WithRawCallbackMethod_Session<v1::SessionService::Service> {
 public:
  GrpcSessionService(RendezvousService& rendezvous, GrpcSessionServiceOptions options);

  // Raw bytes: the reactor parses them (see SessionReactor).
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Session(
      grpc::CallbackServerContext* context) override;

  // Streams whose reactor has not finished (OnDone) yet.
  int open_streams() const { return open_streams_.load(); }

 private:
  RendezvousService& rendezvous_;
  const GrpcSessionServiceOptions options_;
  std::atomic<int> open_streams_{0};
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_GRPC_SESSION_SERVICE_H_
