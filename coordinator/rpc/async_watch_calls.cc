#include "coordinator/rpc/async_watch_calls.h"

#include <mutex>
#include <optional>
#include <string>

#include "absl/hash/hash.h"
#include "common/grpc_status.h"
#include "coordinator/rpc/call_auth.h"
#include "coordinator/rpc/malformed_request.h"
#include "coordinator/rpc/watch_stream.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace ddp::rpc {

constexpr char kWatchMethod[] = "/ddp.v1.KeyValueService/Watch";

// One Watch call on its queue: the WatchStream's transport. Every tag
// completes on the queue's thread; StartWrite and Finish also come from the
// store's notifier, hence the mutex (never held while the stream runs).
class AsyncWatchCall final : public AsyncQueuedCall, public WatchTransport {
 public:
  AsyncWatchCall(AsyncStreamQueue* queue, AsyncWatchCalls* method)
      : queue_(queue), method_(method), writer_(&context_) {}

  void Request() {
    context_.AsyncNotifyWhenDone(&done_tag_);  // delivered only if the call starts
    method_->service_->RequestWatch(&context_, &request_, &writer_, queue_->cq(), queue_->cq(),
                                    &accept_tag_);
  }

  // AsyncQueuedCall.
  void Proceed(Op op, bool ok) override {
    switch (op) {
      case Op::kAccept:
        Accepted(ok);
        return;
      case Op::kWrite:
        Completed(&writing_);
        if (stream_.has_value()) stream_->OnWriteDone(ok);
        break;
      case Op::kFinish: {
        std::lock_guard<std::mutex> lock(mu_);
        finished_ = true;
        break;
      }
      case Op::kDone: {
        {
          std::lock_guard<std::mutex> lock(mu_);
          done_ = true;
        }
        if (context_.IsCancelled() && stream_.has_value()) stream_->OnCancel();
        break;
      }
      case Op::kRead:  // a watch reads its one request with the accept
        return;
    }
    MaybeEnd();
  }

  // WatchTransport.
  void StartWrite(const grpc::ByteBuffer* message) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = true;  // also keeps the call alive while the write is handed
    }
    Write(*queue_, message);
  }
  void Finish(const grpc::Status& status) override { writer_.Finish(status, &finish_tag_); }

 private:
  void Accepted(bool ok) {
    if (!queue_->Accepted(*method_, ok)) {  // the server is shutting down
      delete this;
      return;
    }
    v1::WatchRequest request;
    if (!grpc::SerializationTraits<v1::WatchRequest>::Deserialize(&request_, &request).ok()) {
      Finish(MalformedRequest(kWatchMethod, v1::WatchRequest::descriptor()->full_name()));
      return;
    }
    const auth::Authorizer* authorizer = method_->authorizer_;
    const auth::Identity identity = CallIdentity(authorizer, context_);
    if (absl::Status allowed =
            AuthorizeCall(authorizer, identity, kWatchMethod, request.namespace_());
        !allowed.ok()) {
      Finish(ToGrpcStatus(allowed));
      return;
    }
    // The peer address ("ipv4:HOST:PORT") names the connection.
    stream_.emplace(this, method_->store_, method_->max_message_bytes_, authorizer, identity,
                    absl::Hash<std::string>()(context_.peer()));
    stream_->Start(request);
  }

  void WriteNow(const grpc::ByteBuffer* message) override { writer_.Write(*message, &write_tag_); }

  void Completed(bool* pending) {
    std::lock_guard<std::mutex> lock(mu_);
    *pending = false;
  }

  // The call is over once its Finish completed and its end was noticed, and
  // no write of it is in flight.
  void MaybeEnd() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!finished_ || !done_ || writing_) return;
    }
    if (stream_.has_value()) stream_->OnDone();
    queue_->Ended();
    delete this;
  }

  AsyncStreamQueue* const queue_;
  AsyncWatchCalls* const method_;

  grpc::ServerContext context_;
  grpc::ByteBuffer request_;
  grpc::ServerAsyncWriter<grpc::ByteBuffer> writer_;
  Tag accept_tag_{this, Op::kAccept};
  Tag write_tag_{this, Op::kWrite};
  Tag finish_tag_{this, Op::kFinish};
  Tag done_tag_{this, Op::kDone};
  std::optional<WatchStream> stream_;  // from the call's start, if accepted

  std::mutex mu_;
  bool writing_ = false;
  bool finished_ = false;  // Finish completed
  bool done_ = false;      // AsyncNotifyWhenDone's tag came
};

AsyncWatchCalls::AsyncWatchCalls(KvServiceWithAsyncWatch* service, kv::KvStore& store,
                                 size_t max_message_bytes, const auth::Authorizer* authorizer)
    : service_(service),
      store_(store),
      max_message_bytes_(max_message_bytes),
      authorizer_(authorizer) {}

void AsyncWatchCalls::RequestOn(AsyncStreamQueue& queue) {
  (new AsyncWatchCall(&queue, this))->Request();
}

}  // namespace ddp::rpc
