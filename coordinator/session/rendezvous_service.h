#ifndef DDP_COORDINATOR_SESSION_RENDEZVOUS_SERVICE_H_
#define DDP_COORDINATOR_SESSION_RENDEZVOUS_SERVICE_H_

// The running rendezvous core: owns the JobRegistry and its two background
// threads, and connects the registry's outbox to the sessions and watchers.
//
//   rdzv-ticker    calls JobRegistry::Tick() every tick_interval (timeouts).
//   rdzv-dispatch  woken by the registry's on_outbox callback; drains
//                  TakeOutbox() (always: the outbox is unbounded), routes each
//                  message through the SessionRouter (dropped when the
//                  incarnation no longer matches) and publishes the job events
//                  to the JobWatchHub (bounded queue per watcher).
//   rdzv-writer    with a store: woken by on_pending, writes the registry's
//                  queued changes in batches (JobRegistry "Write-behind"),
//                  one transaction each; retries every retry_interval while
//                  the store fails.
//
// Lifecycle:  Create (Restore + threads started) --> serving --Shutdown--> done
//
// Plain C++ (no gRPC): the grpc_* services are adapters around it.
// Thread-safety: thread-safe; Shutdown is idempotent and also run by the
// destructor.

#include <functional>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/rendezvous/job_registry.h"
#include "coordinator/rendezvous/job_settings.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/session/job_watch_hub.h"
#include "coordinator/session/session_router.h"

namespace ddp::session {

struct RendezvousServiceOptions {
  // Cadence of JobRegistry::Tick (real time); keep it well below the smallest
  // heartbeat_interval a job may use.
  absl::Duration tick_interval = absl::Milliseconds(100);
  int max_jobs = 1024;
  rendezvous::RendezvousLimits limits;
  JobWatchHubOptions watch;
  // Pause between two tries to write job changes while the store fails.
  absl::Duration write_retry_interval = absl::Milliseconds(200);
  // Observers for metrics, called on the service's threads; keep them cheap.
  // Each batch of the core's events, in order, once durable and published.
  std::function<void(const std::vector<rendezvous::JobEvent>&)> on_events;
  // Each durable write of job changes, with its time (transaction and fsync).
  std::function<void(absl::Duration took)> on_commit;
};

class RendezvousService {
 public:
  // Builds the registry over `store` (nullable: nothing persisted; otherwise it
  // must outlive the service), restores the stored jobs and starts the threads.
  // `clock` must outlive the service.
  // Possible errors: INVALID_ARGUMENT (tick_interval <= 0), and
  // JobRegistry::Restore's (UNAVAILABLE, DATA_LOSS).
  static absl::StatusOr<std::unique_ptr<RendezvousService>> Create(
      const Clock& clock, rendezvous::JobStateStore* store, RendezvousServiceOptions options);
  ~RendezvousService();
  RendezvousService(const RendezvousService&) = delete;
  RendezvousService& operator=(const RendezvousService&) = delete;

  rendezvous::JobRegistry& registry() { return *registry_; }
  SessionRouter& router() { return router_; }
  JobWatchHub& watch_hub() { return watch_hub_; }
  const Clock& clock() const { return clock_; }
  const RendezvousServiceOptions& options() const { return options_; }

  // Stops both threads after a last drain of the outbox and ends every watch.
  void Shutdown();

 private:
  RendezvousService(const Clock& clock, rendezvous::JobStateStore* store,
                    RendezvousServiceOptions options);
  void Start();
  void OnOutbox();
  void OnPending();
  void WriterLoop();
  void TickerLoop();
  void DispatchLoop();
  void Drain();

  const Clock& clock_;
  const RendezvousServiceOptions options_;
  SessionRouter router_;
  JobWatchHub watch_hub_;
  std::unique_ptr<rendezvous::JobRegistry> registry_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool outbox_ready_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool dispatcher_stopping_ ABSL_GUARDED_BY(mu_) = false;
  const bool write_behind_;
  std::thread writer_;
  std::thread ticker_;
  std::thread dispatcher_;
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_RENDEZVOUS_SERVICE_H_
