#ifndef DDP_COORDINATOR_RPC_GRPC_PUT_STREAM_REACTOR_H_
#define DDP_COORDINATOR_RPC_GRPC_PUT_STREAM_REACTOR_H_

// KeyValueService.PutStream: many puts on one bidirectional stream, each
// answered on its own once durable. A stream message costs gRPC a fraction of
// a unary call on both sides, which is where a durable put's CPU goes (the
// commit loop batches the fsyncs either way); the answers ready when a write
// starts (a commit's worth) share one message.
//
// Each put runs exactly as a unary Put (the same size checks, the same
// authorization rule on its namespace, PutAsync); its answer carries the code
// and message the Put call would have ended with. Bounded: at most
// `max_in_flight` puts are in the store or waiting to be written back; beyond
// it the reactor stops reading, so a fast client waits in TCP flow control
// instead of in the coordinator's memory. A message may carry at most
// kMaxPutsPerMessage puts.
//
// Lifetime: the reactor deletes itself once gRPC is done with it (OnDone) and
// every put it started has called back (a put's callback may outlive the
// stream: a client that disconnects with puts in flight).
//
// Thread-safety: gRPC's reactions and the store's callbacks take mu_.

#include <cstddef>
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/auth/authorizer.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/rpc/stream_write_gate.h"
#include "ddp/v1/kv.pb.h"
#include "grpcpp/support/server_callback.h"

namespace ddp::rpc {

inline constexpr int kMaxPutsPerMessage = 1024;

class PutStreamReactor final
    : public grpc::ServerBidiReactor<v1::PutStreamRequest, v1::PutStreamResponse> {
 public:
  // `authorizer` may be null (no checks). Starts reading at once.
  PutStreamReactor(kv::KvStore& store, const auth::Authorizer* authorizer,
                   const auth::Identity& caller, size_t max_in_flight);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Holds the reactor for the store's callbacks and the revocation watch: they
  // find `reactor` null once the reactor is gone.
  struct Shared {
    absl::Mutex mu;
    PutStreamReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
  };

  // Authorizes and checks one put, then hands it to the store (not under the
  // lock: the store may call back at once).
  void Start(const v1::StreamedPut& put);
  void AnswerLocked(v1::StreamedPutAnswer answer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared_->mu);
  // Writes the next answer, reads the next request, or ends the stream, as
  // the state allows.
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared_->mu);
  void FinishLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared_->mu);

  kv::KvStore& store_;
  const auth::Authorizer* const authorizer_;
  const auth::Identity caller_;
  const size_t max_in_flight_;
  const std::shared_ptr<Shared> shared_;
  std::unique_ptr<auth::Authorizer::RevocationWatch> revocation_;

  // The read buffer: one read in flight, and none while its puts are started.
  v1::PutStreamRequest request_;
  v1::PutStreamResponse writing_ ABSL_GUARDED_BY(shared_->mu);
  std::deque<v1::StreamedPutAnswer> answers_ ABSL_GUARDED_BY(shared_->mu);
  size_t in_store_ ABSL_GUARDED_BY(shared_->mu) = 0;  // puts not called back yet
  bool reading_ ABSL_GUARDED_BY(shared_->mu) = false;
  bool client_done_ ABSL_GUARDED_BY(shared_->mu) = false;  // half-closed or broken
  bool grpc_done_ ABSL_GUARDED_BY(shared_->mu) = false;    // OnDone ran
  StreamWriteGate gate_ ABSL_GUARDED_BY(shared_->mu);
};

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_GRPC_PUT_STREAM_REACTOR_H_
