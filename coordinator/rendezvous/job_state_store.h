#ifndef DDP_COORDINATOR_RENDEZVOUS_JOB_STATE_STORE_H_
#define DDP_COORDINATOR_RENDEZVOUS_JOB_STATE_STORE_H_

// The persistence seam of the rendezvous core: everything about a job that must
// survive a coordinator restart (settings, state, generation, restart count,
// failure history, exclusions, members with incarnations and ranks, the current
// master info). Changes are incremental (one node record per join, never the
// whole job), so a 4,096-node rendezvous writes O(1) per join. A SQLite
// implementation belongs to the storage layer; InMemoryJobStateStore is the
// fake for tests.
//
// Not persisted (rebuilt after a restart): heartbeat times, session state, the
// stop confirmations and worker exits of the current generation, retained
// events.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/rendezvous/job_types.h"

namespace ddp::rendezvous {

struct JobRecord {
  std::string job_id;
  JobSettings settings;
  JobState state = JobState::kWaiting;
  Generation generation = 0;
  int restart_count = 0;
  std::optional<FailureInfo> root_cause;
  std::string finish_message;
  std::vector<FailureInfo> failures;        // newest last, bounded
  std::vector<std::string> excluded_nodes;  // cannot rejoin
  MasterInfo master;                        // of `generation`, once known
  int64_t world_size = 0;                   // of `generation`
  int64_t last_event_index = 0;
  uint64_t next_join_seq = 1;
  absl::Time created;  // absl::Time() when unknown (stored before it was)
  // Runs of one job id count from 1: a finished job id that starts again is
  // run 2, and so on (its finished run is kept as a past run).
  int run = 1;
  absl::Time finished;  // when it reached a terminal state; absl::Time() before
  // SHA-256 (hex) of the job's bearer token; empty: none (coordinator/auth).
  std::string token_hash;
};

struct NodeRecord {
  std::string node_id;
  Incarnation incarnation = 0;
  int nproc = 1;
  int requested_rank = -1;
  std::string address;
  // Group rank in the job's current generation (or, while waiting, in the last
  // one); -1 when not a member.
  int group_rank = -1;
  int64_t global_rank_offset = 0;  // with group_rank, from the rank table
  uint64_t join_seq = 0;           // join order, for spare selection
};

struct JobSnapshot {
  JobRecord job;
  std::vector<NodeRecord> nodes;
  // Finished runs of the same job id, oldest first: the records as they were
  // when the run was replaced, without their failure history, exclusions and
  // nodes.
  std::vector<JobRecord> past_runs;
};

// Scalars that change on most joins; written apart from the (larger) JobRecord.
struct JobCounters {
  int64_t last_event_index = 0;
  uint64_t next_join_seq = 1;
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
  bool empty() const {
    return !job && !counters && upserted_nodes.empty() && removed_nodes.empty() && !job_removed;
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
  // and retries), INVALID_ARGUMENT (node changes for a job that has no record).
  virtual absl::Status Apply(const JobChanges& changes) = 0;
  // Makes every batch durable in order, all or nothing (one transaction where
  // the store has them). The default applies them one by one.
  virtual absl::Status ApplyBatch(const std::vector<JobChanges>& batch);
  // Every stored job. Possible errors: UNAVAILABLE, DATA_LOSS.
  virtual absl::StatusOr<std::vector<JobSnapshot>> LoadAll() const = 0;
};

// In-memory store for tests and for a coordinator without a data directory.
class InMemoryJobStateStore final : public JobStateStore {
 public:
  absl::Status Apply(const JobChanges& changes) override;
  absl::Status ApplyBatch(const std::vector<JobChanges>& batch) override;
  absl::StatusOr<std::vector<JobSnapshot>> LoadAll() const override;

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
  };
  static absl::Status ApplyTo(const JobChanges& changes, std::map<std::string, StoredJob>& jobs);

  mutable absl::Mutex mu_;
  std::map<std::string, StoredJob> jobs_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_with_ ABSL_GUARDED_BY(mu_);
  int apply_count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_JOB_STATE_STORE_H_
