#include "coordinator/rpc/async_stream_queues.h"

#include <pthread.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp::rpc {
namespace {

// The queue whose completions this thread runs (null on other threads).
thread_local const AsyncStreamQueue* draining_queue = nullptr;

}  // namespace

bool AsyncStreamQueue::OnItsThread() const { return draining_queue == this; }

void AsyncQueuedCall::Write(AsyncStreamQueue& queue, const grpc::ByteBuffer* message) {
  if (!queue.OnItsThread()) {
    handed_write_ = message;
    if (queue.Hand(this)) return;
  }
  WriteNow(message);
}

void AsyncStreamQueue::Drain() {
  draining_queue = this;
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    auto* completed = static_cast<AsyncQueuedCall::Tag*>(tag);
    if (completed->call == nullptr) {  // wakeup_tag_
      StartHanded();
      continue;
    }
    completed->call->Proceed(completed->op, ok);
  }
  draining_queue = nullptr;
}

bool AsyncStreamQueue::Hand(AsyncQueuedCall* call) {
  absl::MutexLock lock(&hand_mu_);
  if (hand_offs_stopped_) return false;
  handed_.push_back(call);
  handed_total_.fetch_add(1, std::memory_order_relaxed);
  if (!wakeup_set_) {
    wakeup_set_ = true;
    // A deadline already past: gRPC posts the tag at once.
    wakeup_.Set(cq_.get(), gpr_now(GPR_CLOCK_MONOTONIC), &wakeup_tag_);
  }
  return true;
}

void AsyncStreamQueue::StartHanded() {
  std::vector<AsyncQueuedCall*> taken;
  {
    absl::MutexLock lock(&hand_mu_);
    taken.swap(handed_);
  }
  for (AsyncQueuedCall* call : taken) call->StartHandedWrite();
  absl::MutexLock lock(&hand_mu_);
  if (handed_.empty()) {
    wakeup_set_ = false;
    return;
  }
  // Handed while this thread started the others (also after StopHandOffs
  // began: the queue is not shut down before these started too).
  wakeup_.Set(cq_.get(), gpr_now(GPR_CLOCK_MONOTONIC), &wakeup_tag_);
}

void AsyncStreamQueue::StopHandOffs() {
  absl::MutexLock lock(&hand_mu_);
  hand_offs_stopped_ = true;
  auto taken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(hand_mu_) { return !wakeup_set_; };
  hand_mu_.Await(absl::Condition(&taken));
}

bool AsyncStreamQueue::Accepted(AsyncQueuedMethod& method, bool ok) {
  if (!ok) {
    Ended();
    return false;
  }
  owner_->RequestCall(method, index_);  // nothing once Stop began
  owner_->CallAccepted();
  return true;
}

void AsyncStreamQueue::Ended() { owner_->CallEnded(index_); }

AsyncStreamQueues::AsyncStreamQueues(AsyncStreamQueuesOptions options)
    : options_(options), pending_accepts_(std::max(1, options.pending_accepts)) {}

AsyncStreamQueues::~AsyncStreamQueues() { Stop(); }

void AsyncStreamQueues::AddMethod(AsyncQueuedMethod* method) { methods_.push_back(method); }

void AsyncStreamQueues::RegisterWith(grpc::ServerBuilder& builder) {
  placement_.emplace(StreamQueuePlacementOptions{
      .min_queues = options_.min_queues,
      .streams_per_queue = options_.streams_per_queue,
      .max_queues = options_.max_queues,
      .accepts_per_queue = pending_accepts_ * static_cast<int>(methods_.size())});
  for (int i = 0; i < placement_->max_queues(); ++i) {
    auto queue = std::make_unique<AsyncStreamQueue>();
    queue->owner_ = this;
    queue->index_ = i;
    queue->cq_ = builder.AddCompletionQueue();
    queues_.push_back(std::move(queue));
  }
}

void AsyncStreamQueues::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || stopped_ || queues_.empty()) return;
    started_ = true;
  }
  // Queue 0 alone until a call is accepted (CallAccepted).
  for (AsyncQueuedMethod* method : methods_) {
    for (int k = 0; k < pending_accepts_; ++k) RequestCall(*method, 0);
  }
}

void AsyncStreamQueues::CallAccepted() {
  if (widened_.exchange(true)) return;
  for (int queue = 1; queue < placement_->OpenQueues(0); ++queue) {
    for (AsyncQueuedMethod* method : methods_) {
      for (int k = 0; k < pending_accepts_; ++k) RequestCall(*method, queue);
    }
  }
}

void AsyncStreamQueues::RequestCall(AsyncQueuedMethod& method, int asking) {
  const int index = placement_->Add(asking);
  AsyncStreamQueue& queue = *queues_[index];
  absl::MutexLock lock(&mu_);  // no request once Stop began to shut the queues down
  if (stopped_) {
    placement_->Remove(index);
    return;
  }
  if (!queue.thread_started_) RunQueueThread(queue);
  method.RequestOn(queue);
}

void AsyncStreamQueues::RunQueueThread(AsyncStreamQueue& queue) {
  queue.thread_started_ = true;
  threads_.emplace_back([&queue] {
    pthread_setname_np(pthread_self(),
                       absl::StrCat("stream-cq-", queue.index()).substr(0, 15).c_str());
    queue.Drain();
  });
}

void AsyncStreamQueues::CallEnded(int queue) { placement_->Remove(queue); }

int64_t AsyncStreamQueues::handed_writes() const {
  int64_t total = 0;
  for (const auto& queue : queues_) total += queue->handed_total_.load(std::memory_order_relaxed);
  return total;
}

int AsyncStreamQueues::running_queues() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(threads_.size());
}

void AsyncStreamQueues::Stop() {
  std::vector<std::thread> threads;
  std::vector<AsyncStreamQueue*> idle;  // never ran a thread (no call was ever requested on them)
  std::vector<AsyncStreamQueue*> running;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    threads.swap(threads_);
    for (auto& queue : queues_) {
      (queue->thread_started_ ? running : idle).push_back(queue.get());
    }
  }
  // Only queues with a thread have streams, hence handed writes.
  for (AsyncStreamQueue* queue : running) queue->StopHandOffs();
  for (auto& queue : queues_) queue->cq_->Shutdown();
  for (std::thread& thread : threads) thread.join();
  for (AsyncStreamQueue* queue : idle) queue->Drain();  // gRPC wants every queue drained
}

}  // namespace ddp::rpc
