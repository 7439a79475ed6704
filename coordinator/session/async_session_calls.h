#ifndef DDP_COORDINATOR_SESSION_ASYNC_SESSION_CALLS_H_
#define DDP_COORDINATOR_SESSION_ASYNC_SESSION_CALLS_H_

// ddp.v1.SessionService on gRPC's async API: the agents' streams served on
// the coordinator's stream queues (rpc::AsyncStreamQueues, which says why),
// each stream's session the same SessionReactor the callback service runs
// (grpc_session_reactor.h); only the transport differs.
//
// A write another thread starts (the commit loop's delivery thread fanning a
// restart out to every agent) is carried out by the stream's queue thread
// (AsyncStreamQueue::Hand), so that a fan-out runs on every queue's thread at
// once (docs/benchmarks.md: 16,384 agents' restart).
//
//   AsyncSessionCalls sessions(rendezvous, options);
//   queues.AddMethod(&sessions);
//   builder.RegisterService(sessions.service());
//   queues.RegisterWith(builder); ... queues.Start(); ... queues.Stop();
//
// Thread-safety: thread-safe. RendezvousService must outlive the object, and
// the object the queues' Stop.

#include <atomic>

#include "coordinator/rpc/async_stream_queues.h"
#include "coordinator/session/grpc_session_service.h"
#include "coordinator/session/rendezvous_service.h"
#include "ddp/v1/session.grpc.pb.h"

namespace ddp::session {

class AsyncSessionCalls final : public rpc::AsyncQueuedMethod {
 public:
  using Service = v1::SessionService::WithRawMethod_Session<v1::SessionService::Service>;

  AsyncSessionCalls(RendezvousService& rendezvous, GrpcSessionServiceOptions options);

  grpc::Service* service() { return &service_; }
  // Streams whose session has not ended yet.
  int open_streams() const { return open_streams_.load(); }

  // rpc::AsyncQueuedMethod.
  void RequestOn(rpc::AsyncStreamQueue& queue) override;

 private:
  RendezvousService& rendezvous_;
  const GrpcSessionServiceOptions options_;
  Service service_;
  std::atomic<int> open_streams_{0};
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_ASYNC_SESSION_CALLS_H_
