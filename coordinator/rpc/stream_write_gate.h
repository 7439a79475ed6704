#ifndef DDP_COORDINATOR_RPC_STREAM_WRITE_GATE_H_
#define DDP_COORDINATOR_RPC_STREAM_WRITE_GATE_H_

// The write side every server stream of the coordinator shares (KV Watch,
// WatchJob, agent Session): gRPC's callback API allows one write in flight per
// stream, and Finish must wait for it. Each stream keeps its own bounded
// source of messages (the KV and job watch hubs' per-watcher queues, the
// session's queue of max_queued_messages) and pulls the next message when the
// gate is open.
//
//   Pump:        if (gate.busy()) return; ...; gate.Write(this, &message);
//   OnWriteDone: if (gate.WriteDone(this, ok, "...")) Pump();
//   any error:   gate.Finish(this, status);
//
// Reactor is a grpc::ServerWriteReactor<W> or grpc::ServerBidiReactor<R, W>
// (anything with StartWrite and Finish). Thread-safety: none of its own; the
// stream guards it with the mutex its reactions take.

#include "grpcpp/support/status.h"

namespace ddp::rpc {

class StreamWriteGate {
 public:
  // A write is in flight, or the stream is finishing: send nothing now.
  bool busy() const { return writing_ || finished_; }
  bool finished() const { return finished_; }

  template <typename Reactor, typename Message>
  void Write(Reactor* reactor, const Message* message) {
    writing_ = true;
    reactor->StartWrite(message);
  }

  // Finishes the stream with `status` now, or once the write in flight is
  // done. The first status wins.
  template <typename Reactor>
  void Finish(Reactor* reactor, const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    if (writing_) {
      finish_pending_ = true;
      final_status_ = status;
      return;
    }
    reactor->Finish(status);
  }

  // From OnWriteDone. Returns true when the stream goes on (send the next
  // message); a failed write finishes it CANCELLED with `broken`.
  template <typename Reactor>
  bool WriteDone(Reactor* reactor, bool ok, const char* broken) {
    writing_ = false;
    if (finish_pending_) {
      finish_pending_ = false;
      reactor->Finish(final_status_);
      return false;
    }
    if (!ok) {
      Finish(reactor, grpc::Status(grpc::StatusCode::CANCELLED, broken));
      return false;
    }
    return !finished_;
  }

 private:
  bool writing_ = false;
  bool finished_ = false;
  bool finish_pending_ = false;
  grpc::Status final_status_;
};

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_STREAM_WRITE_GATE_H_
