#ifndef DDP_COORDINATOR_RENDEZVOUS_JOB_REGISTRY_H_
#define DDP_COORDINATOR_RENDEZVOUS_JOB_REGISTRY_H_

// All jobs of the coordinator by id: the seam the gRPC session and scheduler
// layers call. It serializes every input with one mutex, creates jobs (by the
// scheduler, or implicitly by the first Register that carries settings),
// queues each change for its JobStateStore, and queues the messages and events
// the jobs produce in one ordered outbox.
//
// Delivery: the commit loop's delivery thread takes the outbox (TakeOutbox)
// after each commit, and whenever the `on_outbox` callback fired (it is called
// after the lock is released, so it may call back in), and routes each
// OutboundMessage to the session of (job, node, incarnation); a message for
// another incarnation is dropped. Order is preserved. A successful Register
// puts a Registered message first (before what the registration made the job
// send): the reply is an ordinary message. A session layer that sees a second
// live Register of a node with a new incarnation closes the older stream (the
// core has already fenced it).
//
// Durability (with a store; without one nothing is persisted and messages go
// out at once): changes are written behind, not inside the call. They queue in
// a WriteBehindQueue; `on_pending` tells the commit loop, whose commit thread
// takes them as one batch (TakeCommitBatch) into the transaction it commits
// anyway for the KV store, and reports the outcome (BatchDone). Every message
// and event the changes produced is held until its batch committed, so nothing
// leaves the coordinator that a crash could take back; an agent call returns
// at once and its reply waits in the outbox; a scheduler call waits for its
// batch (AwaitDurable, UNKNOWN after write_timeout). A batch the store refuses
// stays queued and is taken again. 4,096 joins cost a few transactions instead
// of 4,096 fsyncs under the mutex. The outbox is unbounded: the loop drains it.
//
// Timeouts: the commit loop's ticker calls Tick() at a cadence well below the
// smallest heartbeat_interval (every 50 ms);
// Tick is amortized O(1) per job when nothing is due.
//
// Thread-safety: thread-safe.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/rendezvous/job.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/rendezvous/write_behind_queue.h"

namespace ddp::rendezvous {

struct JobRegistryOptions {
  int max_jobs = 1024;  // live and finished jobs held in memory
  RendezvousLimits limits;
  // Called (without the lock held) when the outbox went from empty to
  // non-empty.
  std::function<void()> on_outbox;
  // Called (without the lock held) when changes wait to be written.
  std::function<void()> on_pending;
  // How long a scheduler call waits for its changes to be durable.
  absl::Duration write_timeout = absl::Seconds(10);
  // How long a read (GetJob, ListJobs) waits for the state it read to be
  // durable: readers never see a change that a crash could take back.
  absl::Duration read_timeout = absl::Seconds(5);
  // A Tick that comes more than this after the previous one means the
  // coordinator itself stalled (SIGSTOP, a VM freeze, a commit that blocked
  // the loop): it heard no one meanwhile, so no node's silence counts; every
  // job gives its nodes a full heartbeat_timeout from then, as after a
  // restart (Job::ServingResumed). Zero: off (unit tests that move a fake
  // clock by hand between ticks). RendezvousService turns it on.
  absl::Duration stall_threshold = absl::ZeroDuration();
  // Asked by each Tick before any timeout fires: how many heartbeats the
  // coordinator received but dropped unread since the last call (its UDP
  // receive queue overflowed: UdpHeartbeatEndpoint::TakeOverflow). Any of
  // them may have kept a node alive, so as after a stall no node's silence
  // until now counts: every job gives its nodes a full heartbeat_timeout
  // from now. Only ever delays a decision: a node whose connection closes is
  // still lost through its session, and ddp_heartbeat_datagrams_total
  // {result="overflowed"} tells the operator. Null: never.
  std::function<int64_t()> take_dropped_heartbeats;
  // Asked before a Register or Heartbeat is answered (the answers renew the
  // agent's lease), and after a read (GetJob, ListJobs, EventsSince) took
  // its state: an error (UNAVAILABLE) refuses the call. A coordinator of an
  // HA group that may no longer lead (its leadership lease ran out, e.g.
  // while it was paused) must not renew leases that the new leader does not
  // know about, nor serve state a new leader may have changed (reads stay
  // linearizable). Null: always serving.
  std::function<absl::Status()> serving_check;
  // Asked before a scheduler change (CreateJob, UpdateJob, CancelJob,
  // ExcludeNode, RemoveJob, SetJobTokenHash): an error refuses it at once,
  // with no effect (the store stopped accepting writes after an I/O error:
  // the change could only wait out write_timeout and end UNKNOWN). Null:
  // always writable.
  std::function<absl::Status()> write_check;
};

class JobRegistry {
 public:
  // `store` may be null (nothing persisted); otherwise it must outlive the
  // registry.
  JobRegistry(const Clock& clock, JobStateStore* store, JobRegistryOptions options);

  // Loads every stored job (call once, before serving).
  // Possible errors: the store's; DATA_LOSS for an inconsistent job;
  // FAILED_PRECONDITION when jobs are already loaded.
  absl::Status Restore();

  // ---- Scheduler API ----
  // With a store, each call returns once its change is durable. When it is not
  // durable within write_timeout the call returns UNKNOWN: the change is made
  // and queued, but whether it survives is unknown (it becomes durable if the
  // store recovers, and is gone if the coordinator restarts first); readers do
  // not see it until it is durable.
  // Possible errors: INVALID_ARGUMENT (id, settings), ALREADY_EXISTS,
  // RESOURCE_EXHAUSTED (max_jobs), UNKNOWN (not durable in time).
  // `token_hash`: of the job's bearer token (stored with the job; empty: none).
  absl::StatusOr<v1::Job> CreateJob(const std::string& job_id, const JobSettings& settings,
                                    const std::string& token_hash = "");
  // Replaces the job's token hash (empty: none), durably. Possible errors:
  // NOT_FOUND, and AwaitOwnChanges's.
  absl::Status SetJobTokenHash(const std::string& job_id, const std::string& token_hash);
  // (job id, token hash) of every job that has a token.
  std::vector<std::pair<std::string, std::string>> JobTokenHashes() const;
  // Possible errors: NOT_FOUND, and Job::Update / Cancel / ExcludeNode's.
  absl::Status UpdateJob(const std::string& job_id, int min_nodes, int max_nodes);
  absl::Status CancelJob(const std::string& job_id, const std::string& reason);
  absl::Status ExcludeNode(const std::string& job_id, const std::string& node_id,
                           const std::string& reason);
  // Job::DrainNode in job `job_id`, or (empty) in every unfinished job the
  // node is registered in; returns the ids of those jobs, once durable.
  // Possible errors: NOT_FOUND (no such job, or no job knows the node), and
  // Job::DrainNode's.
  absl::StatusOr<std::vector<std::string>> DrainNode(const std::string& node_id,
                                                     const std::string& job_id,
                                                     absl::Time leaves_at,
                                                     const std::string& reason);
  // Forgets a finished job (memory and store).
  // Possible errors: NOT_FOUND, FAILED_PRECONDITION (job not finished).
  absl::Status RemoveJob(const std::string& job_id);
  // Reads return only durable state: with a store they wait (up to
  // read_timeout) until every change they saw is durable.
  // Possible errors: NOT_FOUND; UNAVAILABLE (the state is not durable within
  // read_timeout: the job database is not accepting writes).
  // `run` 0: the current run; otherwise that run of the job id, current or
  // past (NOT_FOUND naming the runs kept when it is neither).
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id, bool include_nodes, int run = 0) const;
  // `include_past_runs`: the finished runs that later runs replaced too
  // (after each job's current run, oldest first).
  absl::StatusOr<std::vector<v1::Job>> ListJobs(bool include_past_runs = false) const;
  // GetJob without the wait: may show changes that are not durable yet. Only
  // for bookkeeping that must not block (a watch's starting position), never
  // for what a client is shown.
  absl::StatusOr<v1::Job> GetJobIncludingPending(const std::string& job_id) const;
  // Possible errors: NOT_FOUND, OUT_OF_RANGE (events dropped). In
  // With a store only events already taken by TakeOutbox (durable and
  // published) are returned; later ones arrive through the outbox.
  absl::StatusOr<std::vector<JobEvent>> EventsSince(const std::string& job_id, int64_t after_index,
                                                    int limit) const;

  // ---- Agent session API (see Job for each method's errors) ----
  // Creates the job when it does not exist and the request carries settings
  // (NOT_FOUND otherwise; RESOURCE_EXHAUSTED at max_jobs).
  absl::StatusOr<RegisterResult> Register(const RegisterRequest& request);
  // The node's running generation (Job::Heartbeat).
  absl::StatusOr<Generation> Heartbeat(const NodeRef& ref);
  absl::Status ReportProgress(const NodeRef& ref, std::vector<WorkerProgress> progress);
  absl::Status ReportActivity(const NodeRef& ref, std::vector<WorkerActivity> workers);
  absl::Status WorkerExited(const NodeRef& ref, const WorkerExit& exit);
  absl::Status WorkersStopped(const NodeRef& ref);
  absl::Status ReportMasterInfo(const NodeRef& ref, const MasterInfo& info);
  absl::Status StreamClosed(const NodeRef& ref);
  absl::Status Leave(const NodeRef& ref);
  absl::Status Preempted(const NodeRef& ref, absl::Time leaves_at, const std::string& reason);
  absl::Status ReadyToLeave(const NodeRef& ref);

  // Fires due timeouts in every job; call every heartbeat_interval or so.
  // A late call (stall_threshold) first resumes every job's timers.
  void Tick();

  // Everything queued since the last call, in order.
  Outbox TakeOutbox();

  // ---- Durability (see above) ----
  // The commit loop's side (session/rendezvous_service.h): the changes made
  // since the last batch, as the next batch (number 0: none, or one is still
  // in flight); and that batch's outcome: OK releases the messages and events
  // held for it (into the outbox) and returns the callbacks that waited for
  // it (run them without the lock); an error puts the batch back in front of
  // newer changes, to be taken again. BatchDone fires no callback: the
  // caller takes the outbox right after it.
  WriteBehindQueue::Batch TakeCommitBatch();
  std::vector<std::function<void()>> BatchDone(const absl::Status& status,
                                               WriteBehindQueue::Batch batch);
  // One pass of that loop for the registry alone, through its store: the
  // registry's unit tests and fuzz target drive durability with it.
  // Possible errors: the store's (the batch stays queued; retry later).
  absl::Status PersistPending();
  bool HasPendingWrites() const;
  // The batch after whose commit every change made so far is durable.
  uint64_t DurabilityMark() const;
  // Runs `fn` (without the lock) once batch `mark` committed: at once when it
  // already did, otherwise on the commit loop's delivery thread.
  void WhenDurable(uint64_t mark, std::function<void()> fn);
  // Possible errors: UNAVAILABLE (not durable within `timeout`).
  absl::Status AwaitDurable(uint64_t mark, absl::Duration timeout) const;

 private:
  absl::StatusOr<Job*> FindJobLocked(const std::string& job_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns `read` once the changes up to `mark` are durable (see GetJob).
  template <typename T>
  absl::StatusOr<T> DurableRead(uint64_t mark, absl::StatusOr<T> read) const;
  // Drops a finished job from memory and queues its removal from the store
  // (before anything queued after it). Returns the signals to fire.
  absl::StatusOr<v1::Job> PastRunLocked(const std::string& job_id, int run, int current_run) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The finished job `job_id` becomes a past run; returns the number of the
  // run that replaces it.
  int StartNewRunLocked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetLocked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `op` on the job and queues its changes; returns op's status.
  absl::Status RunLocked(const std::string& job_id, const std::function<absl::Status(Job&)>& op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Run(const std::string& job_id, const std::function<absl::Status(Job&)>& op);
  // Takes the job's changes into the write queue (drops them without a store).
  void QueueChangesLocked(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // QueueChangesLocked, then holds the outbox behind the pending writes.
  void AfterChangeLocked(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Holds mu_ for one change; on the way out, after unlocking, fires
  // on_outbox / on_pending when the section filled the empty outbox or queued
  // the first pending change.
  class ABSL_SCOPED_LOCKABLE ChangeScope {
   public:
    explicit ChangeScope(JobRegistry* registry) ABSL_EXCLUSIVE_LOCK_FUNCTION(registry->mu_);
    ~ChangeScope() ABSL_UNLOCK_FUNCTION();
    ChangeScope(const ChangeScope&) = delete;
    ChangeScope& operator=(const ChangeScope&) = delete;

   private:
    JobRegistry* const registry_;
    const bool outbox_was_empty_;
    const bool had_pending_;
  };
  // options_.write_check, before a scheduler change.
  absl::Status CheckWritable() const;
  // Scheduler calls: waits until the call's changes are durable.
  absl::Status AwaitOwnChanges(absl::Status status);

  const Clock& clock_;
  JobStateStore* const store_;
  const JobRegistryOptions options_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  Outbox outbox_ ABSL_GUARDED_BY(mu_);
  WriteBehindQueue write_queue_ ABSL_GUARDED_BY(mu_);
  // With a store: per job, the newest event index TakeOutbox handed out.
  std::map<std::string, int64_t> taken_event_index_ ABSL_GUARDED_BY(mu_);
  // Finished runs that a new run of the same job id replaced, oldest first,
  // at most limits.max_past_runs per job id.
  absl::flat_hash_map<std::string, std::vector<JobRecord>> past_runs_ ABSL_GUARDED_BY(mu_);
  // When Tick last ran (stall_threshold).
  absl::Time last_tick_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Serializes PersistPending (one batch in flight).
  absl::Mutex persist_mu_ ABSL_ACQUIRED_BEFORE(mu_);
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_JOB_REGISTRY_H_
