#include "coordinator/session/async_session_queues.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/rpc/call_auth.h"
#include "coordinator/session/grpc_session_reactor.h"
#include "grpcpp/alarm.h"

namespace ddp::session {
namespace {

// Calls each queue keeps requested, so that a burst of registrations does not
// wait for one accept at a time.
constexpr int kPendingAccepts = 8;

// Queues AsyncSessionQueues may open (created with the server; threads start
// as they get calls). 65,536 agents at 2,048 streams a queue take 32.
constexpr int kMaxSessionQueues = 64;

// A completion-queue tag: the operation of one stream it completes, or
// (kWakeup, no stream) the queue's handed writes to start.
struct AsyncOp {
  enum class Kind { kAccept, kRead, kWrite, kFinish, kWakeup };
  class AsyncSessionStream* stream;
  Kind kind;
};

// The queue whose completions this thread runs (null on other threads).
thread_local const AsyncSessionQueues::Queue* draining_queue = nullptr;

}  // namespace

struct AsyncSessionQueues::Queue {
  AsyncSessionQueues* owner = nullptr;
  int index = 0;
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  bool thread_started = false;  // guarded by owner->mu_

  // Writes that another thread started on this queue's streams, for this
  // queue's thread to start (see AsyncSessionStream::StartWrite).
  // Takes `stream`'s write unless Stop began (false: the caller writes).
  bool Hand(AsyncSessionStream* stream);
  // On this queue's thread, at `wakeup`: the handed streams; then, once
  // their writes started, HandedStarted (which sets `wakeup` again for those
  // handed meanwhile).
  std::vector<AsyncSessionStream*> TakeHanded();
  void HandedStarted();
  // No more hand-offs; returns once this queue's thread started every write
  // handed so far (before the queue shuts down: no write may start on a
  // queue after its last completion).
  void StopHandOffs();

  absl::Mutex hand_mu;
  std::vector<AsyncSessionStream*> handed ABSL_GUARDED_BY(hand_mu);
  // From the first hand-off until HandedStarted finds none left.
  bool wakeup_set ABSL_GUARDED_BY(hand_mu) = false;
  bool hand_offs_stopped ABSL_GUARDED_BY(hand_mu) = false;
  grpc::Alarm wakeup;  // set, for an instant from now, while handed is not empty
  AsyncOp wakeup_op{nullptr, AsyncOp::Kind::kWakeup};
  std::atomic<int64_t> handed_total{0};
};

namespace {

// One agent's stream on the async API: the session's transport. Every tag of
// the stream completes on its queue's thread; StartWrite and Finish also come
// from the delivery thread, hence the mutex (never held while the session
// runs).
//
// A write started on another thread (the commit loop's delivery thread, which
// sends a restart's StopWorkers and Assignments to every agent in turn) is
// handed to the stream's queue thread, which starts it: gRPC then frames and
// sends the message (a sendmsg each) on that thread. A fan-out to N agents is
// thus spread over every queue's thread instead of done by the delivery
// thread alone (docs/benchmarks.md: 16,384 agents' restart). The queue thread
// itself writes at once.
class AsyncSessionStream final : public SessionTransport {
 public:
  AsyncSessionStream(AsyncSessionQueues::Queue* queue, AsyncSessionQueues::Service* service,
                     RendezvousService& rendezvous, const GrpcSessionServiceOptions& options,
                     std::atomic<int>* open_streams)
      : queue_(queue),
        service_(service),
        rendezvous_(rendezvous),
        options_(options),
        open_streams_(open_streams),
        stream_(&context_) {}

  // Asks the server for the next call on this queue. No AsyncNotifyWhenDone:
  // a cancelled call fails the read the session always keeps pending (or the
  // session is finishing already), and one tag less per stream halves what
  // each completion scans.
  void Request() {
    service_->RequestSession(&context_, &stream_, queue_->cq.get(), queue_->cq.get(), &accept_op_);
  }

  void Proceed(AsyncOp::Kind kind, bool ok) {
    switch (kind) {
      case AsyncOp::Kind::kAccept:
        Accepted(ok);
        return;
      case AsyncOp::Kind::kRead:
        Completed(&reading_);
        session_->OnReadDone(ok);
        break;
      case AsyncOp::Kind::kWrite:
        Completed(&writing_);
        session_->OnWriteDone(ok);
        break;
      case AsyncOp::Kind::kFinish: {
        std::lock_guard<std::mutex> lock(mu_);
        finishing_ = false;
        finished_ = true;
        break;
      }
      case AsyncOp::Kind::kWakeup:  // the queue's (Drain), never a stream's
        return;
    }
    MaybeEnd();
  }

  // SessionTransport.
  void StartRead(grpc::ByteBuffer* buffer) override {
    Begin(&reading_);
    stream_.Read(buffer, &read_op_);
  }
  void StartWrite(const grpc::ByteBuffer* buffer) override {
    Begin(&writing_);  // also keeps the stream alive while the write is handed
    if (draining_queue != queue_) {
      handed_write_ = buffer;  // published to the queue thread by Hand's mutex
      if (queue_->Hand(this)) return;
    }
    stream_.Write(*buffer, &write_op_);
  }
  // On the queue's thread: the write StartWrite handed over.
  void StartHandedWrite() { stream_.Write(*handed_write_, &write_op_); }
  void Finish(const grpc::Status& status) override {
    Begin(&finishing_);
    stream_.Finish(status, &finish_op_);
  }

 private:
  void Accepted(bool ok) {
    if (!ok) {  // the server is shutting down: this call never started
      queue_->owner->CallEnded(*queue_);
      delete this;
      return;
    }
    queue_->owner->RequestCall(queue_->index);  // nothing once Stop began
    queue_->owner->CallAccepted();
    session_.emplace(this, rendezvous_, options_, open_streams_,
                     rpc::CallIdentity(options_.authorizer, context_));
  }

  void Begin(bool* pending) {
    std::lock_guard<std::mutex> lock(mu_);
    *pending = true;
  }
  void Completed(bool* pending) {
    std::lock_guard<std::mutex> lock(mu_);
    *pending = false;
  }

  // The session ends once its Finish completed (the call is over) and no
  // read or write of it is in flight.
  void MaybeEnd() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!finished_ || reading_ || writing_) return;
    }
    session_->OnDone();
    queue_->owner->CallEnded(*queue_);
    delete this;
  }

  AsyncSessionQueues::Queue* const queue_;
  AsyncSessionQueues::Service* const service_;
  RendezvousService& rendezvous_;
  const GrpcSessionServiceOptions& options_;
  std::atomic<int>* const open_streams_;

  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_;
  AsyncOp accept_op_{this, AsyncOp::Kind::kAccept};
  AsyncOp read_op_{this, AsyncOp::Kind::kRead};
  AsyncOp write_op_{this, AsyncOp::Kind::kWrite};
  AsyncOp finish_op_{this, AsyncOp::Kind::kFinish};
  std::optional<SessionReactor> session_;  // from the call's start
  const grpc::ByteBuffer* handed_write_ = nullptr;  // the session's, alive until OnWriteDone

  std::mutex mu_;
  bool reading_ = false;
  bool writing_ = false;
  bool finishing_ = false;
  bool finished_ = false;  // Finish completed
};

// Runs the queue's completions until it is shut down and empty.
void Drain(AsyncSessionQueues::Queue& queue) {
  draining_queue = &queue;
  void* tag = nullptr;
  bool ok = false;
  while (queue.cq->Next(&tag, &ok)) {
    AsyncOp* op = static_cast<AsyncOp*>(tag);
    if (op->kind == AsyncOp::Kind::kWakeup) {
      for (AsyncSessionStream* stream : queue.TakeHanded()) stream->StartHandedWrite();
      queue.HandedStarted();
      continue;
    }
    op->stream->Proceed(op->kind, ok);
  }
  draining_queue = nullptr;
}

}  // namespace

bool AsyncSessionQueues::Queue::Hand(AsyncSessionStream* stream) {
  absl::MutexLock lock(&hand_mu);
  if (hand_offs_stopped) return false;
  handed.push_back(stream);
  handed_total.fetch_add(1, std::memory_order_relaxed);
  if (!wakeup_set) {
    wakeup_set = true;
    // A deadline already past: gRPC posts the tag at once.
    wakeup.Set(cq.get(), gpr_now(GPR_CLOCK_MONOTONIC), &wakeup_op);
  }
  return true;
}

std::vector<AsyncSessionStream*> AsyncSessionQueues::Queue::TakeHanded() {
  std::vector<AsyncSessionStream*> taken;
  absl::MutexLock lock(&hand_mu);
  taken.swap(handed);
  return taken;
}

void AsyncSessionQueues::Queue::HandedStarted() {
  absl::MutexLock lock(&hand_mu);
  if (handed.empty()) {
    wakeup_set = false;
    return;
  }
  // Handed while this thread started the others (also after StopHandOffs
  // began: the queue is not shut down before these started too).
  wakeup.Set(cq.get(), gpr_now(GPR_CLOCK_MONOTONIC), &wakeup_op);
}

void AsyncSessionQueues::Queue::StopHandOffs() {
  absl::MutexLock lock(&hand_mu);
  hand_offs_stopped = true;
  auto taken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(hand_mu) { return !wakeup_set; };
  hand_mu.Await(absl::Condition(&taken));
}

namespace {

SessionQueuePlacementOptions PlacementOptions(const GrpcSessionServiceOptions& options) {
  SessionQueuePlacementOptions placement;
  placement.min_queues = std::max(1, options.completion_queues);
  placement.streams_per_queue = std::max(0, options.streams_per_completion_queue);
  placement.max_queues = kMaxSessionQueues;
  placement.accepts_per_queue = kPendingAccepts;
  return placement;
}

}  // namespace

AsyncSessionQueues::AsyncSessionQueues(RendezvousService& rendezvous,
                                       GrpcSessionServiceOptions options)
    : rendezvous_(rendezvous),
      options_(std::move(options)),
      placement_(PlacementOptions(options_)) {}

AsyncSessionQueues::~AsyncSessionQueues() { Stop(); }

void AsyncSessionQueues::RegisterWith(grpc::ServerBuilder& builder) {
  builder.RegisterService(&service_);
  // Every queue the placement may open: gRPC takes queues only before the
  // server starts. One that never gets a call costs no thread.
  for (int i = 0; i < placement_.max_queues(); ++i) {
    auto queue = std::make_unique<Queue>();
    queue->owner = this;
    queue->index = i;
    queue->cq = builder.AddCompletionQueue();
    queues_.push_back(std::move(queue));
  }
}

void AsyncSessionQueues::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || stopped_ || queues_.empty()) return;
    started_ = true;
  }
  // Queue 0 alone until an agent connects (CallAccepted).
  for (int k = 0; k < kPendingAccepts; ++k) RequestCall(/*asking=*/0);
}

void AsyncSessionQueues::CallAccepted() {
  if (widened_.exchange(true)) return;
  for (int queue = 1; queue < placement_.OpenQueues(0); ++queue) {
    for (int k = 0; k < kPendingAccepts; ++k) RequestCall(/*asking=*/queue);
  }
}

void AsyncSessionQueues::RequestCall(int asking) {
  const int index = placement_.Add(asking);
  Queue& queue = *queues_[index];
  absl::MutexLock lock(&mu_);  // no request once Stop began to shut the queues down
  if (stopped_) {
    placement_.Remove(index);
    return;
  }
  if (!queue.thread_started) RunQueueThread(queue);
  (new AsyncSessionStream(&queue, &service_, rendezvous_, options_, &open_streams_))->Request();
}

void AsyncSessionQueues::RunQueueThread(Queue& queue) {
  queue.thread_started = true;
  threads_.emplace_back([&queue] {
    pthread_setname_np(pthread_self(),
                       absl::StrCat("session-cq-", queue.index).substr(0, 15).c_str());
    Drain(queue);
  });
}

void AsyncSessionQueues::CallEnded(const Queue& queue) { placement_.Remove(queue.index); }

int64_t AsyncSessionQueues::handed_writes() const {
  int64_t total = 0;
  for (const auto& queue : queues_) total += queue->handed_total.load(std::memory_order_relaxed);
  return total;
}

int AsyncSessionQueues::running_queues() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size());
}

void AsyncSessionQueues::Stop() {
  std::vector<std::thread> threads;
  std::vector<Queue*> idle;  // never ran a thread (no call was ever requested on them)
  std::vector<Queue*> running;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    threads.swap(threads_);
    for (auto& queue : queues_) {
      (queue->thread_started ? running : idle).push_back(queue.get());
    }
  }
  // Only queues with a thread have streams, hence handed writes.
  for (Queue* queue : running) queue->StopHandOffs();
  for (auto& queue : queues_) queue->cq->Shutdown();
  for (std::thread& thread : threads) thread.join();
  for (Queue* queue : idle) Drain(*queue);  // gRPC wants every queue drained after its shutdown
}

}  // namespace ddp::session
