#ifndef DDP_COORDINATOR_SESSION_GRPC_JOB_WATCH_REACTOR_H_
#define DDP_COORDINATOR_SESSION_GRPC_JOB_WATCH_REACTOR_H_

// The server side of one WatchJob stream (see grpc_job_service.h for what it
// delivers). It subscribes to the JobWatchHub first and then reads the retained
// events, so nothing falls between catch-up and live delivery; events already
// sent (index below next_index_) are skipped. One Write in flight; live events
// wait in the hub's bounded queue.
//
// Lifecycle: created by GrpcJobService::WatchJob; deletes itself in OnDone.
// Thread-safety: gRPC callbacks and the hub's OnReady are serialized by the
// listener's mutex. Lock order: listener mutex, then the hub or the registry
// (neither calls a listener with its own lock held).

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
  JobWatchReactor(RendezvousService& rendezvous, const v1::WatchJobRequest& request,
                  int catch_up_page);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Listener final : public JobEventListener {
   public:
    explicit Listener(JobWatchReactor* reactor) : reactor_(reactor) {}
    void OnReady() override;
    absl::Mutex mu;
    JobWatchReactor* reactor_ ABSL_GUARDED_BY(mu);
  };

  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(listener_->mu);
  // Refills pending_ from the retained events, then from the hub.
  absl::Status RefillLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(listener_->mu);
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(listener_->mu);

  RendezvousService& rendezvous_;
  const std::string job_id_;
  const int catch_up_page_;
  const std::shared_ptr<Listener> listener_;
  JobWatchHub::WatchId watch_id_ = 0;
  bool watching_ = false;

  bool catching_up_ ABSL_GUARDED_BY(listener_->mu) = false;
  int64_t next_index_ ABSL_GUARDED_BY(listener_->mu) = 0;
  rpc::StreamWriteGate gate_ ABSL_GUARDED_BY(listener_->mu);
  bool job_finished_sent_ ABSL_GUARDED_BY(listener_->mu) = false;
  // The job was already finished when catch-up ended: end once drained.
  bool end_when_drained_ ABSL_GUARDED_BY(listener_->mu) = false;
  std::deque<rendezvous::JobEvent> pending_ ABSL_GUARDED_BY(listener_->mu);
  v1::JobEvent outgoing_ ABSL_GUARDED_BY(listener_->mu);
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_GRPC_JOB_WATCH_REACTOR_H_
