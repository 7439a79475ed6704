#include "coordinator/session/async_session_calls.h"

#include <mutex>
#include <optional>
#include <utility>

#include "coordinator/rpc/call_auth.h"
#include "coordinator/session/grpc_session_reactor.h"

namespace ddp::session {
namespace {

using Op = rpc::AsyncQueuedCall::Op;
using Tag = rpc::AsyncQueuedCall::Tag;

// One agent's stream on the async API: the session's transport. Every tag of
// the stream completes on its queue's thread; StartWrite and Finish also come
// from the delivery thread, hence the mutex (never held while the session
// runs).
//
// A write started on another thread is handed to the stream's queue thread,
// which starts it: gRPC then frames and sends the message (a sendmsg each) on
// that thread. The queue thread itself writes at once.
class AsyncSessionStream final : public SessionTransport, public rpc::AsyncQueuedCall {
 public:
  AsyncSessionStream(rpc::AsyncStreamQueue* queue, AsyncSessionCalls* method,
                     AsyncSessionCalls::Service* service, RendezvousService& rendezvous,
                     const GrpcSessionServiceOptions& options, std::atomic<int>* open_streams)
      : queue_(queue),
        method_(method),
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
    service_->RequestSession(&context_, &stream_, queue_->cq(), queue_->cq(), &accept_tag_);
  }

  // rpc::AsyncQueuedCall.
  void Proceed(Op op, bool ok) override {
    switch (op) {
      case Op::kAccept:
        Accepted(ok);
        return;
      case Op::kRead:
        Completed(&reading_);
        session_->OnReadDone(ok);
        break;
      case Op::kWrite:
        Completed(&writing_);
        session_->OnWriteDone(ok);
        break;
      case Op::kFinish: {
        std::lock_guard<std::mutex> lock(mu_);
        finishing_ = false;
        finished_ = true;
        break;
      }
      case Op::kDone:  // never requested
        return;
    }
    MaybeEnd();
  }
  // SessionTransport.
  void StartRead(grpc::ByteBuffer* buffer) override {
    Begin(&reading_);
    stream_.Read(buffer, &read_tag_);
  }
  void StartWrite(const grpc::ByteBuffer* buffer) override {
    Begin(&writing_);  // also keeps the stream alive while the write is handed
    Write(*queue_, buffer);
  }
  void Finish(const grpc::Status& status) override {
    Begin(&finishing_);
    stream_.Finish(status, &finish_tag_);
  }

 private:
  void Accepted(bool ok) {
    if (!queue_->Accepted(*method_, ok)) {  // the server is shutting down
      delete this;
      return;
    }
    session_.emplace(this, rendezvous_, options_, open_streams_,
                     rpc::CallIdentity(options_.authorizer, context_));
  }

  void WriteNow(const grpc::ByteBuffer* buffer) override { stream_.Write(*buffer, &write_tag_); }

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
    queue_->Ended();
    delete this;
  }

  rpc::AsyncStreamQueue* const queue_;
  AsyncSessionCalls* const method_;
  AsyncSessionCalls::Service* const service_;
  RendezvousService& rendezvous_;
  const GrpcSessionServiceOptions& options_;
  std::atomic<int>* const open_streams_;

  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_;
  Tag accept_tag_{this, Op::kAccept};
  Tag read_tag_{this, Op::kRead};
  Tag write_tag_{this, Op::kWrite};
  Tag finish_tag_{this, Op::kFinish};
  std::optional<SessionReactor> session_;  // from the call's start

  std::mutex mu_;
  bool reading_ = false;
  bool writing_ = false;
  bool finishing_ = false;
  bool finished_ = false;  // Finish completed
};

}  // namespace

AsyncSessionCalls::AsyncSessionCalls(RendezvousService& rendezvous,
                                     GrpcSessionServiceOptions options)
    : rendezvous_(rendezvous), options_(std::move(options)) {}

void AsyncSessionCalls::RequestOn(rpc::AsyncStreamQueue& queue) {
  (new AsyncSessionStream(&queue, this, &service_, rendezvous_, options_, &open_streams_))
      ->Request();
}

}  // namespace ddp::session
