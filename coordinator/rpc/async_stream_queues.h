#ifndef DDP_COORDINATOR_RPC_ASYNC_STREAM_QUEUES_H_
#define DDP_COORDINATOR_RPC_ASYNC_STREAM_QUEUES_H_

// The coordinator's long-lived server streams (agents' Session streams, KV
// Watch streams) on gRPC's async API, spread over completion queues, each
// drained by a thread of its own ("stream-cq-<i>").
//
// Why: every completion-queue operation of Debian's libgrpc 1.51 (a build
// without NDEBUG) scans the queue's list of outstanding operations, and the
// callback API puts every stream of the process on one queue: with N streams
// open each message cost O(N) (61 % of the coordinator's CPU at 16,384
// agents; a watch fan-out to 10,000 watchers quadratic in N;
// docs/benchmarks.md). K queues make it O(N / K), and a queue's own thread
// runs the completions it polls without a hand-off. K grows with N
// (StreamQueuePlacement: options.min_queues to start with, doubled whenever
// they hold options.streams_per_queue streams each, at most max_queues), so
// that a message costs about the same at 65,536 streams as at 4,096; a
// queue's thread starts when the queue gets its first call.
// Until the first stream is accepted only queue 0 asks for calls: an idle
// queue's thread still takes turns at polling the server's sockets, and each
// event of another service (a KV put) it reads is handed to that service's
// thread (docs/benchmarks.md). The first accepted call opens the other
// starting queues at once, ahead of a registration burst.
// A write another thread starts (the commit loop's delivery thread fanning a
// restart out to every agent, the KV store's notifier fanning a commit out to
// every watcher) is carried out by the stream's queue thread
// (AsyncStreamQueue::Hand), so that a fan-out runs on every queue's thread at
// once.
//
// Each method served here is an AsyncQueuedMethod (the session's, the KV
// watch's); each of its calls an AsyncQueuedCall whose tags complete on the
// queue its call was requested on.
//
//   AsyncStreamQueues queues(options);
//   queues.AddMethod(&session_calls);    // each method, before RegisterWith
//   builder.RegisterService(...);        // the services owning the methods
//   queues.RegisterWith(builder);        // before BuildAndStart
//   server = builder.BuildAndStart();
//   queues.Start();                      // accepts calls, starts the threads
//   ... server->Shutdown(); server->Wait();
//   queues.Stop();                       // shuts the queues down, drains, joins
//
// Thread-safety: thread-safe. The methods must outlive Stop.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/rpc/stream_queue_placement.h"
#include "grpcpp/alarm.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/byte_buffer.h"

namespace ddp::rpc {

class AsyncStreamQueue;

// One call served on a queue: every tag of it completes on that queue's
// thread, which calls Proceed.
class AsyncQueuedCall {
 public:
  enum class Op { kAccept, kRead, kWrite, kFinish, kDone };
  // A completion-queue tag: which operation of which call completed.
  struct Tag {
    AsyncQueuedCall* call;
    Op op;
  };

  virtual ~AsyncQueuedCall() = default;
  // On the queue's thread: `op` completed with `ok`.
  virtual void Proceed(Op op, bool ok) = 0;
  // On the queue's thread: the write Write handed over.
  void StartHandedWrite() { WriteNow(handed_write_); }

 protected:
  // Starts the write of `message` (alive until its write tag completes) on
  // `queue`'s thread: at once when called there (or once Stop began),
  // else handed over (AsyncStreamQueue::Hand), so that a fan-out from
  // another thread runs on every queue's thread. The caller keeps the call
  // alive until the write completes.
  void Write(AsyncStreamQueue& queue, const grpc::ByteBuffer* message);
  // Starts the write of `message` on the call's stream now.
  virtual void WriteNow(const grpc::ByteBuffer* message) = 0;

 private:
  const grpc::ByteBuffer* handed_write_ = nullptr;  // published to the queue thread by Hand
};

// The calls of one async method the queues accept.
class AsyncQueuedMethod {
 public:
  virtual ~AsyncQueuedMethod() = default;
  // Requests the method's next call on `queue`: a new AsyncQueuedCall whose
  // accept tag is on queue.cq(). When that tag completes, the call calls
  // queue.Accepted(*this, ok); once the call is over, queue.Ended().
  virtual void RequestOn(AsyncStreamQueue& queue) = 0;
};

class AsyncStreamQueues;

// One completion queue of AsyncStreamQueues, what its calls use of it.
class AsyncStreamQueue {
 public:
  grpc::ServerCompletionQueue* cq() const { return cq_.get(); }
  int index() const { return index_; }
  // Whether the calling thread is this queue's.
  bool OnItsThread() const;

  // Takes `call`'s write for this queue's thread to start
  // (AsyncQueuedCall::StartHandedWrite), unless Stop began (false: the caller
  // starts it itself). AsyncQueuedCall::Write uses it.
  bool Hand(AsyncQueuedCall* call);

  // A call of `method` requested on this queue completed its accept tag with
  // `ok`. Accepted: requests the method's next call (on this queue while it
  // has room; the first accepted call opens the other starting queues) and
  // returns true. Not (the server is shutting down; the call never started):
  // frees its place and returns false, and the caller deletes the call.
  bool Accepted(AsyncQueuedMethod& method, bool ok);
  // A call requested on this queue is over (or never started).
  void Ended();

 private:
  friend class AsyncStreamQueues;
  // On this queue's thread: runs its completions until it is shut down and
  // empty.
  void Drain();
  // On this queue's thread, at `wakeup_`: starts the handed writes.
  void StartHanded();
  // No more hand-offs; returns once this queue's thread started every write
  // handed so far (before the queue shuts down: no write may start on a
  // queue after its last completion).
  void StopHandOffs();

  AsyncStreamQueues* owner_ = nullptr;
  int index_ = 0;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  bool thread_started_ = false;  // guarded by owner_->mu_

  absl::Mutex hand_mu_;
  std::vector<AsyncQueuedCall*> handed_ ABSL_GUARDED_BY(hand_mu_);
  // From the first hand-off until StartHanded finds none left.
  bool wakeup_set_ ABSL_GUARDED_BY(hand_mu_) = false;
  bool hand_offs_stopped_ ABSL_GUARDED_BY(hand_mu_) = false;
  grpc::Alarm wakeup_;  // set, for an instant from now, while handed_ is not empty
  AsyncQueuedCall::Tag wakeup_tag_{nullptr, AsyncQueuedCall::Op::kDone};  // no call: the queue's
  std::atomic<int64_t> handed_total_{0};
};

struct AsyncStreamQueuesOptions {
  int min_queues = 4;            // open from the start; >= 1 (raised to 1 otherwise)
  int streams_per_queue = 2048;  // when every open queue holds this many, twice as
                                 // many open; 0: exactly min_queues
  int max_queues = 64;           // >= min_queues
  int pending_accepts = 8;       // calls each queue keeps requested, per method
};

class AsyncStreamQueues {
 public:
  explicit AsyncStreamQueues(AsyncStreamQueuesOptions options = AsyncStreamQueuesOptions());
  ~AsyncStreamQueues();  // Stop()
  AsyncStreamQueues(const AsyncStreamQueues&) = delete;
  AsyncStreamQueues& operator=(const AsyncStreamQueues&) = delete;

  // Before RegisterWith.
  void AddMethod(AsyncQueuedMethod* method);
  // Adds the queues to `builder` (every queue the placement may open: gRPC
  // takes queues only before the server starts; one that never gets a call
  // costs no thread).
  void RegisterWith(grpc::ServerBuilder& builder);
  // After BuildAndStart.
  void Start();
  // After the server's Shutdown (and Wait); idempotent.
  void Stop();

  // Queues whose thread runs (they got a call).
  int running_queues() const;
  // Writes another thread started that a queue's thread carried out
  // (AsyncStreamQueue::Hand), since Start.
  int64_t handed_writes() const;

 private:
  friend class AsyncStreamQueue;
  // Requests one more call of `method`, on `asking` while it has room, else
  // on the queue with the fewest (StreamQueuePlacement), and starts that
  // queue's thread if it has none yet; nothing once Stop began.
  void RequestCall(AsyncQueuedMethod& method, int asking);
  void CallAccepted();
  void CallEnded(int queue);
  void RunQueueThread(AsyncStreamQueue& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AsyncStreamQueuesOptions options_;
  const int pending_accepts_;                              // options_.pending_accepts, at least 1
  std::vector<AsyncQueuedMethod*> methods_;                // from AddMethod, before RegisterWith
  std::optional<StreamQueuePlacement> placement_;          // from RegisterWith
  std::vector<std::unique_ptr<AsyncStreamQueue>> queues_;  // placement_->max_queues()
  std::atomic<bool> widened_{false};  // the starting queues beyond queue 0 were opened
  mutable absl::Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_ASYNC_STREAM_QUEUES_H_
