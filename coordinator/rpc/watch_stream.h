#ifndef DDP_COORDINATOR_RPC_WATCH_STREAM_H_
#define DDP_COORDINATOR_RPC_WATCH_STREAM_H_

// The server side of one Watch stream, whatever carries it (a WatchTransport:
// AsyncWatchCalls' calls on the stream queues). One write is in flight at a time; when
// it completes, the stream pulls the next batch from the KvStore (whose
// per-watcher queue is bounded), so a slow client never makes the server buffer
// without limit.
//
// The first message carries no events: it says the watch is registered, with
// the store revision at that moment. A watcher that is up to date has exactly
// one commit's events to send: that message is the commit's shared
// WatchResponse (built once per commit by the first watcher that sends it,
// kept in its PublishedEvents, revision = the store revision after that
// commit, serialized once), so 1,000 watchers of one key cost one proto and
// one serialization, not 1,000. A watcher
// that is behind gets its pending events in messages of its own, cut at about
// max_message_bytes (an event bigger than that goes alone).
//
// With authorization, the stream ends with UNAUTHENTICATED as soon as the
// token it was opened with is revoked (Authorizer::WatchRevocation).
//
// The stream ends only with an error (it never ends OK on its own): the
// store's shutdown (UNAVAILABLE), compaction of the history it still needs
// (OUT_OF_RANGE), revocation, a broken connection. The message then says
// "this stream sent every matching event through revision N: watch again
// with start_revision N+1" (for OUT_OF_RANGE only the first half: the
// history from N+1 is gone).
//
// Lifecycle: created by the transport once the call started, which calls
// Start, then forwards the call's events; OnDone is the last, after which the
// transport destroys it. Thread-safety: the transport's events and the
// store's OnReady are serialized by the sink's mutex. Lock order: sink mutex,
// then the store's watch hub (via Watch/TakeWatchEvents); the hub never calls
// OnReady with its own lock held.

#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/auth/authorizer.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/rpc/stream_write_gate.h"
#include "ddp/v1/kv.pb.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace ddp::rpc {

// The operations a watch starts on its call: one write in flight at a time
// (serialized WatchResponses), then one Finish. Either may be called from any
// thread (the store's notifier, the call's own), and must not run the
// stream's events inline.
class WatchTransport {
 public:
  virtual ~WatchTransport() = default;
  virtual void StartWrite(const grpc::ByteBuffer* message) = 0;
  virtual void Finish(const grpc::Status& status) = 0;
};

class WatchStream {
 public:
  // `transport` carries the stream and outlives this object. `authorizer`
  // (may be null) ends the stream when `caller`'s token is revoked.
  // `connection` names the stream's connection (e.g. a hash of the peer
  // address; 0: unknown): the store notifies the watchers of one connection
  // together (kv::WatchSink::SendGroup).
  WatchStream(WatchTransport* transport, kv::KvStore& store, size_t max_message_bytes,
              const auth::Authorizer* authorizer = nullptr,
              const auth::Identity& caller = auth::Identity(), uint64_t connection = 0);
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  // Registers the watch and sends the first message, or finishes the stream
  // (refused, a bad request). Once, first.
  void Start(const v1::WatchRequest& request);
  void OnWriteDone(bool ok);
  // The client cancelled the call (or its connection broke).
  void OnCancel();
  // Last: the call is over.
  void OnDone();

 private:
  // Held by the store's watch hub; forwards OnReady to the stream while it
  // lives.
  class Sink : public kv::WatchSink {
   public:
    Sink(WatchStream* stream, uint64_t connection) : stream_(stream), connection_(connection) {}
    void OnReady() override;
    uint64_t SendGroup() const override { return connection_; }
    // The caller's token was revoked: the stream ends UNAUTHENTICATED.
    void OnRevoked(const absl::Status& status);
    absl::Mutex mu;
    WatchStream* stream_ ABSL_GUARDED_BY(mu);
    const uint64_t connection_;
  };

  // Sends the next message if none is in flight. `force`: send even without
  // events.
  void PumpLocked(bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sink_->mu);
  // Fills response_ with pending events (up to about max_message_bytes_).
  void BuildOwnMessageLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sink_->mu);
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sink_->mu);

  WatchTransport* const transport_;
  kv::KvStore& store_;
  const size_t max_message_bytes_;
  const auth::Authorizer* const authorizer_;
  const auth::Identity caller_;
  std::shared_ptr<Sink> sink_;
  kv::WatchId id_ = 0;
  bool registered_ = false;
  std::unique_ptr<auth::Authorizer::RevocationWatch> revocation_;
  StreamWriteGate gate_ ABSL_GUARDED_BY(sink_->mu);
  kv::Revision revision_ ABSL_GUARDED_BY(sink_->mu) = 0;
  // Every event the watch matches up to this revision has been sent (or is
  // in flight, ahead of any final status): a stream that ends with an error
  // names complete_through_ + 1 as the revision to watch again from.
  kv::Revision complete_through_ ABSL_GUARDED_BY(sink_->mu) = 0;
  // The same for the end of the batch in pending_ (WatchBatch::complete_through).
  kv::Revision batch_complete_through_ ABSL_GUARDED_BY(sink_->mu) = 0;
  // Taken from the store, not yet sent; the first `pending_offset_` events of
  // the front chunk are sent already.
  std::deque<kv::PublishedEventsPtr> pending_ ABSL_GUARDED_BY(sink_->mu);
  size_t pending_offset_ ABSL_GUARDED_BY(sink_->mu) = 0;
  // The message in flight is either own_message_ (this watcher's own,
  // response_ serialized) or a commit's shared message, held here until the
  // write completes.
  v1::WatchResponse response_ ABSL_GUARDED_BY(sink_->mu);
  grpc::ByteBuffer own_message_ ABSL_GUARDED_BY(sink_->mu);
  std::shared_ptr<const grpc::ByteBuffer> shared_in_flight_ ABSL_GUARDED_BY(sink_->mu);
};

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_WATCH_STREAM_H_
