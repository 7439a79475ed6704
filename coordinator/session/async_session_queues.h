#ifndef DDP_COORDINATOR_SESSION_ASYNC_SESSION_QUEUES_H_
#define DDP_COORDINATOR_SESSION_ASYNC_SESSION_QUEUES_H_

// ddp.v1.SessionService on gRPC's async API, the agents' streams spread over
// completion queues, each drained by a thread of its own ("session-cq-<i>").
// Each stream's session is the same SessionReactor the callback service runs
// (grpc_session_reactor.h); only the transport differs.
//
// Why: every completion-queue operation of Debian's libgrpc 1.51 (a build
// without NDEBUG) scans the queue's list of outstanding operations, and the
// callback API puts every stream of the process on one queue: with N agents
// connected each message cost O(N) (61 % of the coordinator's CPU at 16,384
// agents; docs/benchmarks.md). K queues make it O(N / K), and a queue's own
// thread runs the completions it polls without a hand-off. K grows with N
// (SessionQueuePlacement: options.completion_queues to start with, doubled
// whenever they hold options.streams_per_completion_queue streams each, at
// most 64), so that a message costs about the same at 65,536 agents as at
// 4,096; a queue's thread starts when the queue gets its first call.
// Until the first agent connects only queue 0 asks for calls: an idle
// queue's thread still takes turns at polling the server's sockets, and
// each event of another service (a KV put) it reads is handed to that
// service's thread (docs/benchmarks.md). The first accepted call opens
// the other starting queues at once, ahead of a registration burst.
// A write another thread starts (the commit loop's delivery thread fanning a
// restart out to every agent) is carried out by the stream's queue thread, so
// that a fan-out runs on every queue's thread at once.
//
//   AsyncSessionQueues queues(rendezvous, options);
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

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/session/grpc_session_service.h"
#include "coordinator/session/rendezvous_service.h"
#include "coordinator/session/session_queue_placement.h"
#include "ddp/v1/session.grpc.pb.h"
#include "grpcpp/server_builder.h"

namespace ddp::session {

class AsyncSessionQueues {
 public:
  using Service = v1::SessionService::WithRawMethod_Session<v1::SessionService::Service>;

  // options.completion_queues >= 1 (raised to 1 otherwise).
  AsyncSessionQueues(RendezvousService& rendezvous, GrpcSessionServiceOptions options);
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
  // Queues whose thread runs (they got a call).
  int running_queues() const;
  // Writes another thread started that a queue's thread carried out
  // (async_session_queues.cc, AsyncSessionStream::StartWrite), since Start.
  int64_t handed_writes() const;

  // Internal: a queue and what its streams need of the whole
  // (async_session_queues.cc).
  struct Queue;
  // Requests one more call, on `asking` (the queue whose accept was used)
  // while it has room, else on the queue with the fewest (SessionQueuePlacement),
  // and starts that queue's thread if it has none yet; nothing once Stop began.
  void RequestCall(int asking);
  // A call requested by RequestCall ended (its stream is deleted).
  void CallEnded(const Queue& queue);
  // A call was accepted: the first one opens the starting queues beyond
  // queue 0 (their accepts, hence their threads).
  void CallAccepted();

 private:
  void RunQueueThread(Queue& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  RendezvousService& rendezvous_;
  const GrpcSessionServiceOptions options_;
  SessionQueuePlacement placement_;
  Service service_;
  std::vector<std::unique_ptr<Queue>> queues_;  // placement_.max_queues(), from RegisterWith
  std::atomic<int> open_streams_{0};
  std::atomic<bool> widened_{false};  // the starting queues beyond queue 0 were opened
  mutable absl::Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_ASYNC_SESSION_QUEUES_H_
