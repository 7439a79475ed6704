#ifndef DDP_COORDINATOR_SESSION_ASYNC_SESSION_QUEUES_H_
#define DDP_COORDINATOR_SESSION_ASYNC_SESSION_QUEUES_H_

// ddp.v1.SessionService on gRPC's async API, the agents' streams spread over
// K completion queues, each drained by a thread of its own
// ("session-cq-<i>"). Each stream's session is the same SessionReactor the
// callback service runs (grpc_session_reactor.h); only the transport differs.
//
// Why: every completion-queue operation of Debian's libgrpc 1.51 (a build
// without NDEBUG) scans the queue's list of outstanding operations, and the
// callback API puts every stream of the process on one queue: with N agents
// connected each message cost O(N) (61 % of the coordinator's CPU at 16,384
// agents; docs/benchmarks.md). K queues make it O(N / K), and a queue's own
// thread runs the completions it polls without a hand-off.
//
//   AsyncSessionQueues queues(rendezvous, options, K);
//   queues.RegisterWith(builder);        // before BuildAndStart
//   server = builder.BuildAndStart();
//   queues.Start();                      // accepts calls, starts the threads
//   ... server->Shutdown(); server->Wait();
//   queues.Stop();                       // shuts the queues down, drains, joins
//
// Thread-safety: thread-safe. RendezvousService must outlive the object.

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "coordinator/session/grpc_session_service.h"
#include "coordinator/session/rendezvous_service.h"
#include "ddp/v1/session.grpc.pb.h"
#include "grpcpp/server_builder.h"

namespace ddp::session {

class AsyncSessionQueues {
 public:
  using Service = v1::SessionService::WithRawMethod_Session<v1::SessionService::Service>;

  // `queues` >= 1.
  AsyncSessionQueues(RendezvousService& rendezvous, GrpcSessionServiceOptions options, int queues);
  ~AsyncSessionQueues();  // Stop()
  AsyncSessionQueues(const AsyncSessionQueues&) = delete;
  AsyncSessionQueues& operator=(const AsyncSessionQueues&) = delete;

  void RegisterWith(grpc::ServerBuilder& builder);
  // After BuildAndStart.
  void Start();
  // After the server's Shutdown (and Wait); idempotent.
  void Stop();

  // Streams whose session has not ended yet.
  int open_streams() const { return open_streams_.load(); }

  // Internal: what a stream needs of its queue (async_session_queues.cc).
  struct Queue;

 private:
  RendezvousService& rendezvous_;
  const GrpcSessionServiceOptions options_;
  const int queue_count_;
  Service service_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<std::thread> threads_;
  std::atomic<int> open_streams_{0};
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_ASYNC_SESSION_QUEUES_H_
