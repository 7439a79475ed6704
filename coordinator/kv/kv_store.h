#ifndef DDP_COORDINATOR_KV_KV_STORE_H_
#define DDP_COORDINATOR_KV_KV_STORE_H_

// The key-value store core: revisioned, namespaced keys with leases,
// TCPStore-style compare-and-set / add / wait, and watches. Plain C++ (no
// gRPC); the gRPC adapter and tests drive it directly.
//
// Writes are asynchronous and group-committed through the coordinator's one
// commit pipeline (coordinator/commit/commit_loop.h; commit/kv_participant.h
// joins a store to it, so this package knows nothing of the pipeline but
// KvCommitPipeline below): every write is queued and the loop's commit thread
// takes all queued writes (up to max_batch_writes) in PrepareCommit, evaluates
// them in order against the committed state plus the earlier writes of the
// batch, and returns the result as the batch's KV part, which the StateStore
// commits in ONE transaction together with whatever job changes wait. In
// FinishCommit the store publishes the batch (readable state, waits, watcher
// queues) and hands the watchers' notifications and the completion callbacks
// to the loop's delivery thread, which runs them in commit order. Reads see only committed,
// published state, so the store is linearizable: a write takes effect at publication, before its
// reply.
//
// The delivery thread first tells idle watchers that events are waiting
// (WatchSink::OnReady: the gRPC adapter starts its write there; with many
// watchers, on notify_threads threads), then runs the batch's completion
// callbacks (the gRPC replies; many of them, on those threads too). The commit thread meanwhile
// evaluates and commits the next batch, so sending replies and watch messages overlaps the next
// fsync instead of delaying it.
//
// Lifecycle:
//
//   Open (Load) --> serving --Shutdown--> closed
//
// Open loads the state; commit::OpenKvStore opens a store and joins it to the
// coordinator's loop (before loop.Start()); tests, fuzzers and tools give a
// store a loop of its own (commit/testing/kv_store_with_loop.h). Shutdown
// refuses new calls with UNAVAILABLE, lets the pipeline commit what is queued
// and send what is left (KvCommitPipeline::Flush), fails pending waits and
// cancels watchers with UNAVAILABLE.
//
// Possible errors (besides those of kv_validation.h, returned before anything
// is queued):
//   Put      NOT_FOUND unknown lease; PERMISSION_DENIED another job's lease
//            (lease_ownership.h); FAILED_PRECONDITION condition failed.
//   Get      NOT_FOUND missing key (at the revision asked); INVALID_ARGUMENT
//            negative revision; OUT_OF_RANGE a revision in the future, below
//            the compacted revision, or whose value of this key was written
//            at or before the compacted revision and changed since (the
//            history keeps the changes after the compacted revision, not the
//            keys as they were at it: etcd would still have it).
//   Add      INVALID_ARGUMENT non-integer value; OUT_OF_RANGE overflow.
//   Wait     DEADLINE_EXCEEDED; RESOURCE_EXHAUSTED too many pending waits.
//   Watch    OUT_OF_RANGE start revision compacted (also later, from
//            TakeWatchEvents: a watcher that fell behind reads the history,
//            see watch_hub.h, and that was compacted); RESOURCE_EXHAUSTED too
//            many watchers.
//   Lease*   NOT_FOUND unknown or expired lease; PERMISSION_DENIED another
//            job's lease; RESOURCE_EXHAUSTED too many.
//   Compact  INVALID_ARGUMENT revision <= 0; OUT_OF_RANGE revision beyond
//            current + 1.
//   Writes   UNAVAILABLE when shutting down, queue full, or the commit failed
//            before anything was written (the write had no effect: retry);
//            UNKNOWN when the commit failed in a way that leaves its outcome
//            unknown (an I/O or fsync error at COMMIT): the write may or may
//            not be durable, so read before retrying a non-idempotent one.
//            After UNKNOWN, or any I/O error, the store is write-failed
//            (fail-stop): every later write gets UNAVAILABLE ("no writes until
//            the coordinator restarts"; it had no effect); reads still serve
//            what was acknowledged. A restart recovers from the backend's log.
//
// Thread-safety: thread-safe. Completion callbacks run on the loop's delivery
// thread (in commit order: a batch's callbacks after those of every batch
// committed before it; the callbacks of one batch, committed together, may run
// concurrently on the notify_threads threads), its ticker thread (wait
// timeouts) or, for invalid input, the calling thread: they must be quick,
// safe to run concurrently, and must not call the synchronous wrappers
// (deadlock). When a write's callback runs, every watcher that the
// write concerns has it queued and, if it was idle, has been sent OnReady.

#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/kv/key_space.h"
#include "coordinator/kv/kv_backend.h"
#include "coordinator/kv/kv_ops.h"
#include "coordinator/kv/kv_types.h"
#include "coordinator/kv/lease_ownership.h"
#include "coordinator/kv/lease_table.h"
#include "coordinator/kv/sink_notifier.h"
#include "coordinator/kv/wait_registry.h"
#include "coordinator/kv/watch_hub.h"
#include "coordinator/kv/write_batch_builder.h"

namespace ddp::kv {

struct KvStoreOptions {
  KvLimits limits;
  // Automatic retention: keep the history of the last N revisions (0: keep
  // everything).
  int64_t history_revisions = 100'000;
  // At most this many writes per group commit.
  size_t max_batch_writes = 8192;
  // Writes beyond this many queued are refused with UNAVAILABLE.
  size_t max_pending_writes = 200'000;
  // Queue bounds (events, bytes) and page sizes of watchers (max_watchers
  // and max_event_bytes come from limits).
  WatchHubOptions watch;
  // Threads that tell watchers about a commit and send its replies (the
  // delivery thread included; see sink_notifier.h), and the fewest watchers
  // or replies worth more than one.
  int notify_threads = 2;
  size_t notify_parallel_min = 32;
  // Asked after Get and Range read the state: an error (UNAVAILABLE) is
  // returned instead of what was read. An HA leader checks that its
  // leadership lease still holds at that moment: a leader that was paused
  // while another took over and wrote must not answer with what it had
  // (reads stay linearizable). Null: always.
  std::function<absl::Status()> read_check;
  // Where lease ids come from (lease_ownership.h); null: RandomLeaseId.
  LeaseIdSource lease_ids;
  // WriteHealth (readiness) is not OK while the last commit failed this
  // recently (any commit of the loop: KV writes or job changes), e.g. every
  // commit meeting "database is locked".
  absl::Duration unhealthy_after_failed_commit = absl::Seconds(10);
};

template <typename T>
using Callback = std::function<void(absl::StatusOr<T>)>;

// What a KvStore needs of the commit pipeline that persists its writes
// (commit::OpenKvStore provides it over the coordinator's CommitLoop).
class KvCommitPipeline {
 public:
  virtual ~KvCommitPipeline() = default;
  // Writes wait: wake the commit thread (it calls PrepareCommit).
  virtual void Notify() = 0;
  // Returns once everything notified before was committed (or failed) and
  // its sends ran (Shutdown).
  virtual void Flush() = 0;
};

// What one commit's KV part hands over for the delivery thread.
using KvSends = std::vector<std::function<void()>>;

class KvStore final {
 public:
  // Loads the backend's state (leases get a full TTL from now). `backend`
  // (reads: Load, ReadEvents, Compact) and `pipeline` must outlive the store,
  // and the pipeline must call PrepareCommit/FinishCommit/Tick as below.
  // Errors: those of KvBackend::Load.
  static absl::StatusOr<std::unique_ptr<KvStore>> Open(KvBackend& backend,
                                                       KvCommitPipeline& pipeline,
                                                       const Clock& clock, KvStoreOptions options);
  ~KvStore();  // Shutdown()
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  void Shutdown();

  // Asynchronous writes: `done` runs exactly once, after the write is durable
  // (or failed); for invalid input it runs at once on the calling thread.
  void PutAsync(PutRequest request, Callback<PutResult> done);
  void DeleteAsync(DeleteRequest request, Callback<DeleteResult> done);
  void CompareAndSetAsync(CompareAndSetRequest request, Callback<CompareAndSetResult> done);
  void AddAsync(AddRequest request, Callback<AddResult> done);
  void LeaseGrantAsync(LeaseGrantRequest request, Callback<LeaseGrantResult> done);
  void LeaseRevokeAsync(LeaseId lease, const LeaseCaller& caller, Callback<LeaseRevokeResult> done);
  void CompactAsync(Revision revision, Callback<CompactResult> done);
  // Runs `done` once all keys exist (possibly at once) or with
  // DEADLINE_EXCEEDED.
  void WaitAsync(WaitRequest request, Callback<WaitResult> done);

  // Reads and lease keep-alive complete at once.
  absl::StatusOr<GetResult> Get(const GetRequest& request) const;
  absl::StatusOr<RangeResult> Range(const RangeRequest& request) const;
  absl::StatusOr<LeaseKeepAliveResult> LeaseKeepAlive(
      LeaseId lease, const LeaseCaller& caller = LeaseCaller::Anyone());
  // The live leases `caller` may act on, ascending (etcdctl's lease list).
  std::vector<LeaseId> LeaseList(const LeaseCaller& caller = LeaseCaller::Anyone()) const;
  // Time left of `lease` and, with `with_keys`, its keys. Errors as
  // LeaseKeepAlive (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED).
  absl::StatusOr<LeaseTimeToLiveResult> LeaseTimeToLive(
      LeaseId lease, bool with_keys, const LeaseCaller& caller = LeaseCaller::Anyone()) const;
  KvStoreStatus Status() const;
  // The namespaces that hold clients' keys, in name order, with their key
  // counts (the store's own lease-owner namespace left out).
  NamespaceList ListNamespaces() const;
  // OK while writes are accepted; after a storage failure, why they are not
  // (the store is fail-stop until restarted). A commit that merely failed
  // (and is retried) does not count: see WriteHealth.
  absl::Status FailStop() const;
  // FailStop, or, while the last commit failed less than
  // unhealthy_after_failed_commit ago, UNAVAILABLE naming its cause (until a
  // commit succeeds). Readiness probes.
  absl::Status WriteHealth() const;

  // Watches: register a sink, then pull with TakeWatchEvents (see watch_hub.h).
  absl::StatusOr<WatchId> Watch(const WatchRequest& request, std::shared_ptr<WatchSink> sink);
  absl::Status TakeWatchEvents(WatchId id, WatchBatch* batch);
  void CancelWatch(WatchId id);

  // Expires leases (their keys are deleted through a normal write) and waits
  // whose deadline passed. Called by the pipeline's ticker thread, or by
  // tests after moving a FakeClock.
  void Tick();

  // The pipeline's side, on its commit thread. PrepareCommit moves the queued
  // writes (up to max_batch_writes) into the batch's KV part `kv` (left
  // empty when none changes a key or lease) and returns true when it left
  // writes queued (run again at once). FinishCommit learns the batch's
  // outcome: `status` (OK: durable), `batch_ran` (false when the batch was
  // empty and nothing was committed); it may take its part back out of `kv`
  // and appends what may now be sent, in order, to `sends`.
  bool PrepareCommit(std::optional<KvWriteBatch>& kv);
  void FinishCommit(const absl::Status& status, bool batch_ran, std::optional<KvWriteBatch>& kv,
                    KvSends& sends);

  // Synchronous wrappers (tests, tools). Never call them from a completion
  // callback.
  absl::StatusOr<PutResult> Put(PutRequest request);
  absl::StatusOr<DeleteResult> Delete(DeleteRequest request);
  absl::StatusOr<CompareAndSetResult> CompareAndSet(CompareAndSetRequest request);
  absl::StatusOr<AddResult> Add(AddRequest request);
  absl::StatusOr<LeaseGrantResult> LeaseGrant(int64_t ttl_ms, std::string owner = "");
  absl::StatusOr<LeaseRevokeResult> LeaseRevoke(LeaseId lease,
                                                const LeaseCaller& caller = LeaseCaller::Anyone());
  absl::StatusOr<CompactResult> Compact(Revision revision);
  absl::StatusOr<WaitResult> Wait(WaitRequest request);

  const KvLimits& limits() const { return options_.limits; }

 private:
  using WriteDone = std::function<void(absl::StatusOr<WriteOutcome>)>;
  struct PendingWrite {
    WriteOp op;               // unused for compactions
    Revision compact_to = 0;  // > 0: a compaction (runs after the batch's commit)
    WriteDone done;
    absl::StatusOr<WriteOutcome> result;  // set on the commit thread
  };
  // What one committed batch leaves for the delivery thread, in this order.
  struct Delivery {
    std::vector<std::shared_ptr<WatchSink>> ready;  // OnReady
    WaitRegistry::Finished waits;                   // satisfied Wait calls
    std::vector<PendingWrite> writes;               // done(result)
  };

  KvStore(KvBackend& backend, KvCommitPipeline& pipeline, const Clock& clock,
          KvStoreOptions options);
  absl::Status LoadState();
  // The owners of loaded leases: their owner keys, else (leases granted
  // before owners) the one namespace of their keys.
  void LoadLeaseOwnersLocked(const absl::flat_hash_map<LeaseId, std::string>& recorded)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_mu_);
  void Enqueue(PendingWrite write);
  // Runs one batch's notifications and callbacks (delivery thread).
  void Deliver(Delivery& delivery);
  // The status a failed group commit's writes get; stops all writes unless
  // the backend says nothing was written (UNAVAILABLE).
  absl::Status CommitFailure(const absl::Status& cause, size_t writes)
      ABSL_LOCKS_EXCLUDED(queue_mu_, state_mu_);
  // An empty batch vector with capacity, recycled from the delivery thread:
  // with 256 clients a batch vector is ~100 KB, and allocating and freeing
  // that per batch sent glibc's malloc into consolidation every time.
  std::vector<PendingWrite> SpareBatch();
  void MaybeRetainHistory();
  absl::Status RunCompaction(Revision compact_to, Revision* compacted);
  // Get at request.revision > 0: the current state and the history after the
  // compacted revision (backend_.ReadEvents) say what the key held then.
  absl::StatusOr<GetResult> GetAtRevision(const GetRequest& request) const
      ABSL_LOCKS_EXCLUDED(state_mu_);

  KvBackend& backend_;
  KvCommitPipeline& pipeline_;
  const Clock& clock_;
  const KvStoreOptions options_;
  const LeaseIdSource lease_ids_;
  WatchHub hub_;
  SinkNotifier notifier_;  // used by the delivery thread

  // Readable, committed state. Written only by the commit thread (and
  // Tick/KeepAlive for lease deadlines and waits).
  mutable absl::Mutex state_mu_;
  KeySpace keys_ ABSL_GUARDED_BY(state_mu_);
  LeaseTable leases_ ABSL_GUARDED_BY(state_mu_);
  WaitRegistry waits_ ABSL_GUARDED_BY(state_mu_);
  Revision revision_ ABSL_GUARDED_BY(state_mu_) = 0;
  Revision compacted_revision_ ABSL_GUARDED_BY(state_mu_) = 0;
  bool waits_closed_ ABSL_GUARDED_BY(state_mu_) = false;

  // The write queue.
  mutable absl::Mutex queue_mu_;
  std::vector<PendingWrite> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  // Set once a commit failed in a way that stops all writes (see the file
  // comment); every later write is refused with it.
  absl::Status write_failure_ ABSL_GUARDED_BY(queue_mu_);
  // The last commit's error and when (OK once a commit succeeded).
  absl::Status last_commit_failure_ ABSL_GUARDED_BY(queue_mu_);
  absl::Time last_commit_failure_at_ ABSL_GUARDED_BY(queue_mu_);

  // Commit thread only: the batch between Prepare and Finish.
  std::vector<PendingWrite> batch_;
  std::optional<WriteBatchBuilder> builder_;

  absl::Mutex spare_mu_;
  std::vector<std::vector<PendingWrite>> spare_batches_ ABSL_GUARDED_BY(spare_mu_);

  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_KV_STORE_H_
