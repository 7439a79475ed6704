#include "coordinator/session/async_session_queues.h"

#include <pthread.h>

#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/rpc/call_auth.h"
#include "coordinator/session/grpc_session_reactor.h"

namespace ddp::session {
namespace {

// Calls each queue keeps requested, so that a burst of registrations does not
// wait for one accept at a time.
constexpr int kPendingAccepts = 8;

// A completion-queue tag: the operation of one stream it completes.
struct AsyncOp {
  enum class Kind { kAccept, kRead, kWrite, kFinish };
  class AsyncSessionStream* stream;
  Kind kind;
};

}  // namespace

struct AsyncSessionQueues::Queue {
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  std::atomic<bool> accepting{true};
};

namespace {

// One agent's stream on the async API: the session's transport. Every tag of
// the stream completes on its queue's thread; StartWrite and Finish also come
// from the delivery thread, hence the mutex (never held while the session
// runs).
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
    }
    MaybeEnd();
  }

  // SessionTransport.
  void StartRead(grpc::ByteBuffer* buffer) override {
    Begin(&reading_);
    stream_.Read(buffer, &read_op_);
  }
  void StartWrite(const grpc::ByteBuffer* buffer) override {
    Begin(&writing_);
    stream_.Write(*buffer, &write_op_);
  }
  void Finish(const grpc::Status& status) override {
    Begin(&finishing_);
    stream_.Finish(status, &finish_op_);
  }

 private:
  void Accepted(bool ok) {
    if (!ok) {  // the server is shutting down: this call never started
      delete this;
      return;
    }
    if (queue_->accepting.load()) {
      (new AsyncSessionStream(queue_, service_, rendezvous_, options_, open_streams_))->Request();
    }
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

  std::mutex mu_;
  bool reading_ = false;
  bool writing_ = false;
  bool finishing_ = false;
  bool finished_ = false;  // Finish completed
};

void Drain(AsyncSessionQueues::Queue* queue, int index) {
  pthread_setname_np(pthread_self(), absl::StrCat("session-cq-", index).substr(0, 15).c_str());
  void* tag = nullptr;
  bool ok = false;
  while (queue->cq->Next(&tag, &ok)) {
    AsyncOp* op = static_cast<AsyncOp*>(tag);
    op->stream->Proceed(op->kind, ok);
  }
}

}  // namespace

AsyncSessionQueues::AsyncSessionQueues(RendezvousService& rendezvous,
                                       GrpcSessionServiceOptions options, int queues)
    : rendezvous_(rendezvous),
      options_(std::move(options)),
      queue_count_(queues < 1 ? 1 : queues) {}

AsyncSessionQueues::~AsyncSessionQueues() { Stop(); }

void AsyncSessionQueues::RegisterWith(grpc::ServerBuilder& builder) {
  builder.RegisterService(&service_);
  for (int i = 0; i < queue_count_; ++i) {
    auto queue = std::make_unique<Queue>();
    queue->cq = builder.AddCompletionQueue();
    queues_.push_back(std::move(queue));
  }
}

void AsyncSessionQueues::Start() {
  if (started_ || queues_.empty()) return;
  started_ = true;
  for (size_t i = 0; i < queues_.size(); ++i) {
    Queue* queue = queues_[i].get();
    for (int k = 0; k < kPendingAccepts; ++k) {
      (new AsyncSessionStream(queue, &service_, rendezvous_, options_, &open_streams_))->Request();
    }
    threads_.emplace_back([queue, i] { Drain(queue, static_cast<int>(i)); });
  }
}

void AsyncSessionQueues::Stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& queue : queues_) {
    queue->accepting.store(false);
    queue->cq->Shutdown();
  }
  for (std::thread& thread : threads_) thread.join();
  if (!started_) {  // nothing was requested: drain what the queues hold
    for (auto& queue : queues_) {
      void* tag = nullptr;
      bool ok = false;
      while (queue->cq->Next(&tag, &ok)) {
      }
    }
  }
}

}  // namespace ddp::session
