#ifndef DDP_COORDINATOR_RENDEZVOUS_JOB_STATE_STORE_H_
#define DDP_COORDINATOR_RENDEZVOUS_JOB_STATE_STORE_H_

// The persistence seam of the rendezvous core: everything about a job that must
// survive a coordinator restart (settings, state, generation, restart count,
// failure history, exclusions, members with incarnations and ranks, the current
// master info, the retained job events). Changes are incremental (one node
// record per join, one row per new event, never the whole job), so a
// 4,096-node rendezvous writes O(1) per join. A SQLite implementation belongs
// to the storage layer; InMemoryJobStateStore is the fake for tests.
//
// Events: a job's events are appended with the batch that produced them and
// kept up to the core's retention (RendezvousLimits::max_retained_events): the
// core says which ones it dropped (JobChanges::drop_events_before), and the
// store drops them in the same transaction. LoadAll returns them, so WatchJob
// resumes across a restart or a failover from the index it had. A job's
// removal drops its events (a past run keeps none). Besides, the store counts
// every event it appends by type (restarts by cause) in the same transaction,
// never decreasing (LoadEventCounts): the totals the metrics start from.
//
// Not persisted (rebuilt after a restart): heartbeat times, session state, the
// stop confirmations and worker exits of the current generation.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/rendezvous/job_types.h"
#include "ddp/state/v1/records.pb.h"

namespace ddp::rendezvous {

// Scalars that change on most joins; written apart from the (larger) JobRecord.
struct JobCounters {
  int64_t last_event_index = 0;
  uint64_t next_join_seq = 1;
};

// A job as it is stored: the stored message itself (ddp.state.v1.JobRecord),
// one record from Job (MakeRecord) and the registry's past runs to the stores,
// which persist its bytes (SQLite, etcd) and read them back
// (storage/job_record_codec upgrades what earlier releases stored).
//   job_id, settings (the API's JobSettings), generation, restart_count,
//   world_size (of `generation`), excluded_nodes (cannot rejoin),
//   finish_message, token_hash (SHA-256 hex of the job's bearer token; empty:
//   none, coordinator/auth).
//   state: a JobState, numbered from 0 (JobStateOf, SetJobState).
//   cause: the root cause (absent: none); failure_history: newest last,
//     bounded (RestartPolicy).
//   master: of `generation`, once known (MasterInfo).
//   created_unix_ns, finished_unix_ns: 0 when unknown or not finished
//     (CreatedAt/FinishedAt, SetCreated/SetFinished).
//   run: runs of one job id count from 1: a finished job id that starts again
//     is run 2, and so on (its finished run is kept as a past run).
//   last_event_index, next_join_seq: the counters (CountersOf, SetCounters).
// Adding a field touches records.proto, the code that sets it and its test.
using JobRecord = ::ddp::state::v1::JobRecord;

// The record of a job that was never stored: run 1, waiting, next join seq 1.
JobRecord NewJobRecord(std::string job_id, JobSettings settings, absl::Time created);
// The stored state (the codec refused a number that is no JobState).
JobState JobStateOf(const JobRecord& record);
void SetJobState(JobState state, JobRecord* record);
// absl::Time() when unknown (stored before it was) or, finished, before the
// job ended.
absl::Time CreatedAt(const JobRecord& record);
absl::Time FinishedAt(const JobRecord& record);
void SetCreated(absl::Time created, JobRecord* record);
void SetFinished(absl::Time finished, JobRecord* record);
std::optional<FailureInfo> RootCauseOf(const JobRecord& record);
JobCounters CountersOf(const JobRecord& record);
void SetCounters(const JobCounters& counters, JobRecord* record);

// A node of a job as it is stored: the stored message itself
// (ddp.state.v1.NodeRecord), one record from Membership, which keeps it, to
// the stores, which persist its bytes (SQLite, etcd) and read them back.
//   node_id, incarnation, nproc, requested_rank (-1: none), address.
//   group_rank: in the job's current generation (or, while waiting, in the
//     last one); -1 when not a member. global_rank_offset: with group_rank,
//     from the rank table. join_seq: join order, for spare selection.
//   drain_leaves_at_unix_ms, drain_reason: set while the node drains
//     (Job::DrainNode): when it leaves at the latest and why, so that a drain
//     under way survives a coordinator restart; 0: not draining
//     (DrainLeavesAt, SetDrain).
// Adding a field touches records.proto, the code that sets it and its test.
using NodeRecord = ::ddp::state::v1::NodeRecord;

// A record of `node_id` with nproc 1, no requested rank and no group rank.
NodeRecord NewNodeRecord(std::string node_id);
// When a draining node leaves at the latest; nullopt when it does not drain.
std::optional<absl::Time> DrainLeavesAt(const NodeRecord& node);
// Marks the node draining until `leaves_at` (kept to the millisecond).
void SetDrain(absl::Time leaves_at, std::string reason, NodeRecord* node);

struct JobSnapshot {
  JobRecord job;
  std::vector<NodeRecord> nodes;
  // Finished runs of the same job id, oldest first: the records as they were
  // when the run was replaced (with their root cause and failure history),
  // without their exclusions, nodes and events.
  std::vector<JobRecord> past_runs;
  // The retained events of the current run, by index (oldest first).
  std::vector<JobEvent> events;
};

// How many job events a store ever appended, by type, and RESTARTING events
// by restart cause: what the metrics' counters are built from. Removing a job
// or dropping its old events does not lower them.
struct JobEventCounts {
  // (type, cause) -> events; cause is RESTART_CAUSE_UNSPECIFIED except for
  // RESTARTING.
  using Key = std::pair<JobEventType, RestartCause>;
  std::map<Key, int64_t> counts;

  // Counts `event` once.
  void Add(const JobEvent& event);
  void Add(JobEventType type, RestartCause cause, int64_t n);
  int64_t Of(JobEventType type, RestartCause cause = RestartCause::RESTART_CAUSE_UNSPECIFIED) const;
  friend bool operator==(const JobEventCounts& a, const JobEventCounts& b) {
    return a.counts == b.counts;
  }
};

// One atomic batch of changes to one job.
struct JobChanges {
  std::string job_id;
  std::optional<JobRecord> job;            // set when the job record changed
  std::optional<JobCounters> counters;     // overrides the record's counters
  std::vector<NodeRecord> upserted_nodes;  // by node_id, last one wins
  std::vector<std::string> removed_nodes;
  bool job_removed = false;  // drop the job and all its nodes
  // With job_removed: the finished run that a new run replaces, kept as a
  // past run; past runs numbered below `keep_runs_from` are dropped. Without
  // it, a removal drops the past runs too (DeleteJob).
  std::optional<JobRecord> archived_run;
  int keep_runs_from = 0;
  // Events the job emitted since its last batch, by index (appended after the
  // record and nodes; ignored with job_removed). An index already stored is
  // replaced.
  std::vector<JobEvent> appended_events;
  // > 0: stored events with a lower index are dropped (the core no longer
  // retains them).
  int64_t drop_events_before = 0;
  bool empty() const {
    return !job && !counters && upserted_nodes.empty() && removed_nodes.empty() && !job_removed &&
           appended_events.empty() && drop_events_before == 0;
  }
  // Folds `later` into this batch (later wins).
  void Merge(JobChanges later);
};

// Thread-safety: implementations must be thread-safe.
class JobStateStore {
 public:
  virtual ~JobStateStore() = default;
  // Makes `changes` durable, all or nothing.
  // Possible errors: UNAVAILABLE (storage failed; the caller keeps the batch
  // and retries), INVALID_ARGUMENT (node changes or events for a job that has
  // no record).
  virtual absl::Status Apply(const JobChanges& changes) = 0;
  // Makes every batch durable in order, all or nothing (one transaction where
  // the store has them). The default applies them one by one.
  virtual absl::Status ApplyBatch(const std::vector<JobChanges>& batch);
  // Every stored job. Possible errors: UNAVAILABLE, DATA_LOSS.
  virtual absl::StatusOr<std::vector<JobSnapshot>> LoadAll() const = 0;
  // The events appended so far, counted. Possible errors: UNAVAILABLE,
  // DATA_LOSS.
  virtual absl::StatusOr<JobEventCounts> LoadEventCounts() const = 0;
};

// In-memory store for tests and for a coordinator without a data directory.
class InMemoryJobStateStore final : public JobStateStore {
 public:
  absl::Status Apply(const JobChanges& changes) override;
  absl::Status ApplyBatch(const std::vector<JobChanges>& batch) override;
  absl::StatusOr<std::vector<JobSnapshot>> LoadAll() const override;
  absl::StatusOr<JobEventCounts> LoadEventCounts() const override;

  // Test hook: the next Apply calls fail with `status` until cleared
  // (OkStatus()).
  void FailWith(absl::Status status);
  int apply_count() const;

 private:
  struct StoredJob {
    JobRecord job;
    bool has_record = false;  // false: only past runs (within a batch)
    std::map<std::string, NodeRecord> nodes;
    std::map<int, JobRecord> past_runs;
    std::map<int64_t, JobEvent> events;  // by index
  };
  // INVALID_ARGUMENT if a change of `batch` names a job that has no record
  // (stored, or created earlier in the batch) and does not carry one.
  absl::Status CheckRecordsLocked(const std::vector<JobChanges>& batch) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies `changes` in place, counting its events (CheckRecordsLocked
  // accepted its batch).
  void ApplyLocked(const JobChanges& changes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, StoredJob> jobs_ ABSL_GUARDED_BY(mu_);
  JobEventCounts counts_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_with_ ABSL_GUARDED_BY(mu_);
  int apply_count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_JOB_STATE_STORE_H_
