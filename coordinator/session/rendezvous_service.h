#ifndef DDP_COORDINATOR_SESSION_RENDEZVOUS_SERVICE_H_
#define DDP_COORDINATOR_SESSION_RENDEZVOUS_SERVICE_H_

// The running rendezvous core: owns the JobRegistry, the SessionRouter and the
// JobWatchHub, and takes part in the commit loop (commit/commit_loop.h):
//
//   Prepare  (commit thread)   the registry's queued job changes go into the
//                              loop's batch (JobRegistry::TakeCommitBatch)
//   Finish   (commit thread)   the batch's outcome goes back to the registry
//                              (BatchDone: durable releases what was held for
//                              it), then the outbox is taken and handed over
//   send     (delivery thread) each message is routed through the
//                              SessionRouter (dropped when the incarnation no
//                              longer matches), the job events are published
//                              to the JobWatchHub; then the WhenDurable
//                              callbacks of the batch run
//   Tick     (ticker thread)   JobRegistry::Tick (timeouts)
//
// The registry's on_pending and on_outbox callbacks wake the loop.
//
// Lifecycle:  Create (Restore, join a loop) --> serving --Shutdown--> done
//
// Plain C++ (no gRPC): the grpc_* services are adapters around it.
// Thread-safety: thread-safe; Shutdown is idempotent and also run by the
// destructor.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/commit/commit_loop.h"
#include "coordinator/commit/state_store.h"
#include "coordinator/rendezvous/job_registry.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/session/job_watch_hub.h"
#include "coordinator/session/session_router.h"

namespace ddp::session {

struct RendezvousServiceOptions {
  // What the loop the service joins should run with (the coordinator's
  // loop takes them, as does testing/with_own_commit_loop.h): the cadence
  // of JobRegistry::Tick (real time; keep it well below the smallest
  // heartbeat_interval a job may use) and the pause between two tries to
  // write job changes while the store fails.
  absl::Duration tick_interval = absl::Milliseconds(100);
  absl::Duration write_retry_interval = absl::Milliseconds(200);
  int max_jobs = 1024;
  rendezvous::RendezvousLimits limits;
  JobWatchHubOptions watch;
  // JobRegistryOptions::stall_threshold: a tick this late means the
  // coordinator stalled, and every node gets a full heartbeat timeout.
  absl::Duration stall_threshold = absl::Seconds(1);
  // JobRegistryOptions::take_dropped_heartbeats (JobServices wires the UDP
  // endpoint's TakeOverflow); null: never.
  std::function<int64_t()> take_dropped_heartbeats;
  // JobRegistryOptions::serving_check (HA: is this coordinator still the
  // leader?); null: always.
  std::function<absl::Status()> serving_check;
  // JobRegistryOptions::write_check (the store's write health); null: none.
  std::function<absl::Status()> write_check;
  // Observer for metrics: each batch of the core's events, in order, once
  // durable and published (delivery thread); keep it cheap.
  std::function<void(const std::vector<rendezvous::JobEvent>&)> on_events;
};

class RendezvousService final : public commit::CommitParticipant {
 public:
  // In the coordinator's loop (not started yet; it must outlive the service):
  // restores the jobs of loop.store(). Possible errors: JobRegistry::Restore's
  // (UNAVAILABLE, DATA_LOSS). A service with a loop of its own (tests, tools):
  // testing/with_own_commit_loop.h.
  static absl::StatusOr<std::unique_ptr<RendezvousService>> Create(
      const Clock& clock, commit::CommitLoop& loop, RendezvousServiceOptions options);
  ~RendezvousService() override;
  RendezvousService(const RendezvousService&) = delete;
  RendezvousService& operator=(const RendezvousService&) = delete;

  // The core's time (its injected clock): what the adapters date replies by.
  absl::Time Now() const { return clock_.Now(); }
  // The bounds the adapters check requests against before the core sees them.
  const rendezvous::RendezvousLimits& limits() const { return options_.limits; }
  // Agent sessions bound to a (job, node, incarnation) in the router.
  int session_count() const { return router_.session_count(); }
  // Closes every agent session with `status` (coordinator shutdown).
  void CloseAllSessions(const absl::Status& status) { router_.CloseAll(status); }
  // Sends RequestStacks{request_id} to the session of (job, node,
  // incarnation) at once, outside the commit loop (it changes no state);
  // false when the node has no such session.
  bool RequestStacks(const std::string& job_id, const std::string& node_id,
                     rendezvous::Incarnation incarnation, uint64_t request_id) {
    return router_.Route(rendezvous::OutboundMessage{job_id, node_id, incarnation,
                                                     rendezvous::RequestStacks{request_id}});
  }

  // ---- Job watches (the WatchJob adapter calls these): JobWatchHub's
  // Watch / Take / Cancel, with their errors ----
  absl::StatusOr<JobWatchHub::WatchId> WatchJob(const std::string& job_id,
                                                std::shared_ptr<JobEventListener> listener) {
    return watch_hub_.Watch(job_id, std::move(listener));
  }
  absl::Status TakeWatchedEvents(JobWatchHub::WatchId id,
                                 std::vector<rendezvous::JobEvent>* events) {
    return watch_hub_.Take(id, events);
  }
  void CancelWatch(JobWatchHub::WatchId id) { watch_hub_.Cancel(id); }
  int watcher_count() const { return watch_hub_.watcher_count(); }

  // ---- Scheduler API (the gRPC job adapter and the composition root call
  // these): each is JobRegistry's of the same name, with its errors ----
  absl::StatusOr<v1::Job> CreateJob(const std::string& job_id,
                                    const rendezvous::JobSettings& settings,
                                    const std::string& token_hash) {
    return registry_->CreateJob(job_id, settings, token_hash);
  }
  absl::Status SetJobTokenHash(const std::string& job_id, const std::string& token_hash) {
    return registry_->SetJobTokenHash(job_id, token_hash);
  }
  // (job id, token hash) of every job that has a token.
  std::vector<std::pair<std::string, std::string>> JobTokenHashes() const {
    return registry_->JobTokenHashes();
  }
  absl::Status UpdateJob(const std::string& job_id, int min_nodes, int max_nodes) {
    return registry_->UpdateJob(job_id, min_nodes, max_nodes);
  }
  absl::Status CancelJob(const std::string& job_id, const std::string& reason) {
    return registry_->CancelJob(job_id, reason);
  }
  absl::Status ExcludeNode(const std::string& job_id, const std::string& node_id,
                           const std::string& reason) {
    return registry_->ExcludeNode(job_id, node_id, reason);
  }
  absl::StatusOr<std::vector<std::string>> DrainNode(const std::string& node_id,
                                                     const std::string& job_id,
                                                     absl::Time leaves_at,
                                                     const std::string& reason) {
    return registry_->DrainNode(node_id, job_id, leaves_at, reason);
  }
  absl::Status RemoveJob(const std::string& job_id) { return registry_->RemoveJob(job_id); }
  // Durable state only (JobRegistry's reads).
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id, bool include_nodes, int run = 0) const {
    return registry_->GetJob(job_id, include_nodes, run);
  }
  absl::StatusOr<std::vector<v1::Job>> ListJobs(bool include_past_runs) const {
    return registry_->ListJobs(include_past_runs);
  }
  // Without the durability wait: only for a watch's starting position.
  absl::StatusOr<v1::Job> GetJobIncludingPending(const std::string& job_id) const {
    return registry_->GetJobIncludingPending(job_id);
  }
  absl::StatusOr<std::vector<rendezvous::JobEvent>> EventsSince(const std::string& job_id,
                                                                int64_t after_index,
                                                                int limit) const {
    return registry_->EventsSince(job_id, after_index, limit);
  }

  // ---- One agent session (the gRPC session adapter calls these) ----
  // Registers the node and binds `sink` to (job, node, incarnation): the
  // sink is attached before the core sees the registration (so no message
  // can miss it), detached again if the core refuses it, and an older stream
  // of the node is closed (ABORTED) once it is accepted. The Registered reply
  // reaches the sink as the first message, once durable.
  // Possible errors: JobRegistry::Register's.
  absl::StatusOr<rendezvous::RegisterResult> OpenSession(const rendezvous::RegisterRequest& request,
                                                         std::shared_ptr<SessionSink> sink);
  // The node leaves the job; `sink` is closed with OK (the agent's
  // acknowledgement) once the departure is durable. Possible errors:
  // JobRegistry::Leave's (UNAVAILABLE is not one: the node is gone in
  // memory, and the stream closes once that is durable).
  absl::Status LeaveSession(const rendezvous::NodeRef& ref, std::shared_ptr<SessionSink> sink);
  // The stream of `sink` ended: it leaves the router, and, when the node had
  // not left, the core learns it unless a newer stream of the node already
  // took over.
  void SessionEnded(const rendezvous::NodeRef& ref, const SessionSink* sink, bool left);
  // The messages of a registered session (and of the UDP heartbeat
  // endpoint): JobRegistry's of the same name, with its errors.
  absl::StatusOr<rendezvous::Generation> Heartbeat(const rendezvous::NodeRef& ref) {
    return registry_->Heartbeat(ref);
  }
  absl::Status ReportProgress(const rendezvous::NodeRef& ref,
                              std::vector<rendezvous::WorkerProgress> progress) {
    return registry_->ReportProgress(ref, std::move(progress));
  }
  absl::Status ReportActivity(const rendezvous::NodeRef& ref,
                              std::vector<rendezvous::WorkerActivity> workers) {
    return registry_->ReportActivity(ref, std::move(workers));
  }
  absl::Status WorkerExited(const rendezvous::NodeRef& ref, const rendezvous::WorkerExit& exit) {
    return registry_->WorkerExited(ref, exit);
  }
  absl::Status WorkersStopped(const rendezvous::NodeRef& ref) {
    return registry_->WorkersStopped(ref);
  }
  absl::Status ReportMasterInfo(const rendezvous::NodeRef& ref,
                                const rendezvous::MasterInfo& info) {
    return registry_->ReportMasterInfo(ref, info);
  }
  absl::Status Preempted(const rendezvous::NodeRef& ref, absl::Time leaves_at,
                         const std::string& reason) {
    return registry_->Preempted(ref, leaves_at, reason);
  }
  absl::Status ReadyToLeave(const rendezvous::NodeRef& ref) { return registry_->ReadyToLeave(ref); }

  // Lets the loop commit and send what is queued, then ends every watch.
  void Shutdown();

  // commit::CommitParticipant.
  bool Prepare(commit::StateBatch& batch) override;
  void Finish(const absl::Status& status, commit::StateBatch& batch, commit::Sends& sends) override;
  void Tick() override { registry_->Tick(); }

  // Tests only: the core and the router underneath, for what no adapter does
  // (a registration whose session is bound to another incarnation, to check
  // that the router drops its messages).
  rendezvous::JobRegistry& registry_for_testing() { return *registry_; }
  SessionRouter& router_for_testing() { return router_; }

 private:
  RendezvousService(const Clock& clock, rendezvous::JobStateStore* store,
                    RendezvousServiceOptions options);
  absl::Status Join(commit::CommitLoop& loop);
  // Delivery thread: routes the messages and publishes the events.
  void Send(const rendezvous::Outbox& outbox);

  const Clock& clock_;
  const RendezvousServiceOptions options_;
  SessionRouter router_;
  JobWatchHub watch_hub_;
  std::unique_ptr<rendezvous::JobRegistry> registry_;
  commit::CommitLoop* loop_ = nullptr;
  // Commit thread only: the batch between Prepare and Finish.
  rendezvous::WriteBehindQueue::Batch in_flight_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_RENDEZVOUS_SERVICE_H_
