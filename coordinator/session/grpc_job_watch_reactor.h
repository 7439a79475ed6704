#ifndef DDP_COORDINATOR_SESSION_GRPC_JOB_WATCH_REACTOR_H_
#define DDP_COORDINATOR_SESSION_GRPC_JOB_WATCH_REACTOR_H_

// The server side of one WatchJob stream (see grpc_job_service.h for what it
// delivers). It subscribes to the JobWatchHub first and then reads the retained
// events, so nothing falls between catch-up and live delivery; events already
// sent (index below next_index_) are skipped. One Write in flight.
//
// Memory is bounded in bytes per watcher (issue 23): the reactor takes every
// live event from the hub as soon as the hub has one (so the hub's own queue
// stays short) and holds it until its client reads it. When what it holds
// exceeds GrpcJobServiceOptions::watch_buffer_bytes, the stream ends with
// RESOURCE_EXHAUSTED naming the from_index to watch again from (every event
// before it was delivered), as etcd cancels a watcher it cannot keep.
//
// With authorization, the stream ends with UNAUTHENTICATED as soon as the
// token it was opened with is revoked (Authorizer::WatchRevocation).
//
// Lifecycle: created by GrpcJobService::WatchJob; deletes itself in OnDone.
// Thread-safety: gRPC callbacks and the hub's OnReady are serialized by the
// listener's mutex. Lock order: listener mutex, then the hub or the registry
// (neither calls a listener with its own lock held).

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/rpc/stream_write_gate.h"
#include "coordinator/session/grpc_job_service.h"
#include "coordinator/session/job_watch_hub.h"
#include "coordinator/session/rendezvous_service.h"
#include "ddp/v1/jobs.grpc.pb.h"

namespace ddp::session {

class JobWatchReactor final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  // `caller`: whose token opened the stream (options.authorizer watches it).
  JobWatchReactor(RendezvousService& rendezvous, const v1::WatchJobRequest& request,
                  const GrpcJobServiceOptions& options,
                  const auth::Identity& caller = auth::Identity());

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // About the bytes `event` holds (what the buffer bound counts).
  static size_t ApproxBytes(const rendezvous::JobEvent& event);

 private:
  class Listener final : public JobEventListener {
   public:
    explicit Listener(JobWatchReactor* reactor) : reactor_(reactor) {}
    void OnReady() override;
    // The caller's token was revoked: the stream ends UNAUTHENTICATED.
    void OnRevoked(const absl::Status& status);
    absl::Mutex mu;
    JobWatchReactor* reactor_ ABSL_GUARDED_BY(mu);
  };

  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(listener_->mu);
  // Refills pending_ from the retained events, then from the hub.
  absl::Status RefillLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(listener_->mu);
  // Moves the hub's events into the buffer (live_ while catching up, else
  // pending_); RESOURCE_EXHAUSTED when the buffer is over its bound.
  absl::Status TakeLiveLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(listener_->mu);
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(listener_->mu);

  RendezvousService& rendezvous_;
  const std::string job_id_;
  const int catch_up_page_;
  const size_t max_buffered_bytes_;
  const std::shared_ptr<Listener> listener_;
  JobWatchHub::WatchId watch_id_ = 0;
  bool watching_ = false;
  std::unique_ptr<auth::Authorizer::RevocationWatch> revocation_;

  bool catching_up_ ABSL_GUARDED_BY(listener_->mu) = false;
  int64_t next_index_ ABSL_GUARDED_BY(listener_->mu) = 0;
  rpc::StreamWriteGate gate_ ABSL_GUARDED_BY(listener_->mu);
  bool job_finished_sent_ ABSL_GUARDED_BY(listener_->mu) = false;
  // The job was already finished when catch-up ended: end once drained.
  bool end_when_drained_ ABSL_GUARDED_BY(listener_->mu) = false;
  // With end_when_drained_: the finished job's last event. Its events that were
  // not yet in the store's queue when the catch-up read them (the job's state
  // already counts them) come through the subscription; the stream ends once
  // they are sent, not before.
  int64_t last_event_index_ ABSL_GUARDED_BY(listener_->mu) = 0;
  // Events to send, in index order (those below next_index_ are skipped).
  std::deque<rendezvous::JobEvent> pending_ ABSL_GUARDED_BY(listener_->mu);
  // Live events taken while catching up: appended to pending_ when it ends.
  std::deque<rendezvous::JobEvent> live_ ABSL_GUARDED_BY(listener_->mu);
  // ApproxBytes of pending_ and live_.
  size_t buffered_bytes_ ABSL_GUARDED_BY(listener_->mu) = 0;
  v1::JobEvent outgoing_ ABSL_GUARDED_BY(listener_->mu);
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_GRPC_JOB_WATCH_REACTOR_H_
