#ifndef DDP_TOOLS_RDZV_SIM_ASYNC_CLIENT_BIDI_H_
#define DDP_TOOLS_RDZV_SIM_ASYNC_CLIENT_BIDI_H_

// The client side of grpc::ClientBidiReactor's interface (StartCall,
// StartRead, StartWrite, StartWritesDone, AddHold/RemoveHold and the On*
// reactions) over gRPC's async API on a completion queue of the caller's
// choice, so that a simulator with many thousand streams can spread them over
// several queues (each drained by its own thread, AsyncClientQueues).
//
// Why: Debian's libgrpc 1.51 is built without NDEBUG, and there every
// completion-queue operation scans the queue's outstanding operations; the
// callback API puts all of a process's streams on one queue, so with N
// streams each message cost O(N) (see coordinator/session/
// async_session_calls.h for the server side).
//
// Differences from the callback API, none of which the simulator relies on:
// reactions never run inline inside a Start*; a write waits until StartCall's
// operations completed (the async stream sends them with the writes' own
// operation set); WritesDone only after that; OnDone(status) comes once the
// read side ended (a read failed), every hold is released and no operation is
// in flight (then Finish is called for the status).
//
// Thread-safety: Start* from any thread (at most one read and one write in
// flight, as with the callback API); reactions run on the queue's thread.

#include <memory>
#include <mutex>

#include "grpcpp/grpcpp.h"

namespace ddp::rdzv_sim {

// A tag on an AsyncClientQueues queue.
class AsyncClientTag {
 public:
  virtual ~AsyncClientTag() = default;
  virtual void Proceed(bool ok) = 0;
};

template <typename Request, typename Response>
class AsyncClientBidi {
 public:
  using Stream = grpc::ClientAsyncReaderWriter<Request, Response>;
  virtual ~AsyncClientBidi() = default;

  virtual void OnReadDone(bool ok) = 0;
  virtual void OnWriteDone(bool ok) = 0;
  virtual void OnWritesDoneDone(bool ok) = 0;
  virtual void OnDone(const grpc::Status& status) = 0;

 protected:
  // The call's context (declared before the stream, so it outlives it).
  grpc::ClientContext& context() { return context_; }
  // The stream from the stub's PrepareAsync<Method>(&context(), queue);
  // before StartCall.
  void Bind(std::unique_ptr<Stream> stream) { stream_ = std::move(stream); }

  void StartCall() {
    std::unique_lock<std::mutex> lock(mu_);
    started_ = true;
    ++pending_;
    stream_->StartCall(&start_op_);  // its operation set is the writes' own:
    if (deferred_read_ != nullptr) IssueReadLocked(deferred_read_);
    deferred_read_ = nullptr;  // writes wait for it to complete (Started)
  }
  void StartRead(Response* response) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!started_) {
      deferred_read_ = response;
      return;
    }
    IssueReadLocked(response);
  }
  void StartWrite(const Request* request) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!start_done_) {
      deferred_write_ = request;
      return;
    }
    IssueWriteLocked(request);
  }
  void StartWritesDone() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!start_done_) {
      deferred_writes_done_ = true;
      return;
    }
    ++pending_;
    stream_->WritesDone(&writes_done_op_);
  }
  void AddHold() {
    std::unique_lock<std::mutex> lock(mu_);
    ++holds_;
  }
  void RemoveHold() {
    bool finish = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      --holds_;
      finish = ShouldFinishLocked();
    }
    if (finish) Finish();
  }

 private:
  class Op final : public AsyncClientTag {
   public:
    Op(AsyncClientBidi* owner, void (AsyncClientBidi::*done)(bool)) : owner_(owner), done_(done) {}
    void Proceed(bool ok) override { (owner_->*done_)(ok); }

   private:
    AsyncClientBidi* const owner_;
    void (AsyncClientBidi::*const done_)(bool);
  };

  void IssueReadLocked(Response* response) {
    ++pending_;
    stream_->Read(response, &read_op_);
  }
  void IssueWriteLocked(const Request* request) {
    ++pending_;
    stream_->Write(*request, &write_op_);
  }
  bool ShouldFinishLocked() {
    if (finish_called_ || !read_ended_ || holds_ > 0 || pending_ > 0) return false;
    finish_called_ = true;
    return true;
  }
  void Finish() { stream_->Finish(&status_, &finish_op_); }

  // The reactions of each operation.
  void Started(bool /*ok*/) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_done_ = true;
      if (deferred_write_ != nullptr) IssueWriteLocked(deferred_write_);
      deferred_write_ = nullptr;
      if (deferred_writes_done_) {  // the caller never has a write in flight then
        ++pending_;
        stream_->WritesDone(&writes_done_op_);
      }
      deferred_writes_done_ = false;
    }
    Settle(nullptr, false);
  }
  void ReadDone(bool ok) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!ok) read_ended_ = true;
    }
    Settle(&AsyncClientBidi::OnReadDone, ok);
  }
  void WriteDone(bool ok) { Settle(&AsyncClientBidi::OnWriteDone, ok); }
  void WritesDoneDone(bool ok) { Settle(&AsyncClientBidi::OnWritesDoneDone, ok); }
  void Finished(bool /*ok*/) { OnDone(status_); }

  // One operation completed: its reaction, then Finish when nothing is left.
  void Settle(void (AsyncClientBidi::*reaction)(bool), bool ok) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      --pending_;
      ++reacting_;
    }
    if (reaction != nullptr) (this->*reaction)(ok);
    bool finish = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      --reacting_;
      finish = reacting_ == 0 && ShouldFinishLocked();
    }
    if (finish) Finish();
  }

  grpc::ClientContext context_;
  std::unique_ptr<Stream> stream_;  // lives in the call's arena: before context_ goes
  grpc::Status status_;
  Op start_op_{this, &AsyncClientBidi::Started};
  Op read_op_{this, &AsyncClientBidi::ReadDone};
  Op write_op_{this, &AsyncClientBidi::WriteDone};
  Op writes_done_op_{this, &AsyncClientBidi::WritesDoneDone};
  Op finish_op_{this, &AsyncClientBidi::Finished};

  std::mutex mu_;
  bool started_ = false;
  bool start_done_ = false;  // StartCall's operations completed: writes may go
  Response* deferred_read_ = nullptr;
  const Request* deferred_write_ = nullptr;
  bool deferred_writes_done_ = false;
  int pending_ = 0;   // operations issued and not completed
  int reacting_ = 0;  // reactions running
  int holds_ = 0;
  bool read_ended_ = false;
  bool finish_called_ = false;
};

}  // namespace ddp::rdzv_sim

#endif  // DDP_TOOLS_RDZV_SIM_ASYNC_CLIENT_BIDI_H_
