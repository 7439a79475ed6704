#ifndef DDP_COORDINATOR_STORAGE_SQLITE_JOB_STATE_STORE_H_
#define DDP_COORDINATOR_STORAGE_SQLITE_JOB_STATE_STORE_H_

// The production JobStateStore: the rendezvous state of every job in its own
// SQLite file (the coordinator opens DATA_DIR/jobs.db), WAL mode with
// synchronous=FULL. The file has its own `PRAGMA user_version`, so its
// migrations never collide with the KV store's (DATA_DIR/coordinator.db).
//
// Tables (ids are BLOBs: arbitrary bytes round-trip and sort bytewise):
//   jobs                one row per job: settings (durations in whole
//                       milliseconds), state, generation, restart count, root
//                       cause (present flag + fields), finish message, master
//                       info (the NCCL unique id as a BLOB), world size and the
//                       counters (last_event_index, next_join_seq)
//   job_failures        (job_id, seq): the failure history, seq = position
// A failure (history rows, and the root cause's root_cause_* columns) keeps
// every FailureInfo field; hang and pid came with schema version 2 (rows of
// version 1 read as no hang, pid 0).
//   job_excluded_nodes  (job_id, node_id): a set, returned sorted bytewise
//   job_nodes           (job_id, node_id): one row per registered node
// uint64 values (incarnation, join_seq, next_join_seq) are stored as the int64
// with the same bits; times as Unix nanoseconds (infinite times kept).
//
// Apply is one BEGIN IMMEDIATE ... COMMIT (one WAL fsync) with cached prepared
// statements, and writes only what the batch names: counters plus one node is
// one UPDATE and one INSERT, whatever the job's size. A batch with a job record
// rewrites the jobs row and the failure history (bounded by
// RendezvousLimits::max_retained_failures) and only the differences of the
// excluded set.
//
// Semantics match InMemoryJobStateStore: `job_removed` drops the job with all
// its rows and ignores the rest of the batch; counters override the record's;
// removals run before upserts; node or counter changes for a job without a
// record fail with INVALID_ARGUMENT and change nothing. One difference: the
// jobs row is keyed by JobChanges::job_id, so a record whose job_id differs is
// rejected (INVALID_ARGUMENT) instead of stored under the batch's id.
// Sub-millisecond parts of the settings' durations are dropped (settings
// arrive in milliseconds, see jobs.proto).
//
// One SqliteJobStateStore per file: it is the file's only writer.
//
// Thread-safety: thread-safe; Apply and LoadAll serialize on one mutex.

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/storage/sqlite_database.h"

namespace ddp::rendezvous {

struct SqliteJobStateStoreOptions {
  // How long a statement waits for a lock held by another connection.
  absl::Duration busy_timeout = absl::Seconds(5);
};

class SqliteJobStateStore final : public JobStateStore {
 public:
  // Opens (creating if needed) the database at `db_path` and brings the job
  // schema up to date.
  // Possible errors: FAILED_PRECONDITION (the file cannot be created or
  // written, or its schema is newer than this binary), DATA_LOSS (not a SQLite
  // database, or corrupt), UNAVAILABLE (I/O error, locked).
  static absl::StatusOr<std::unique_ptr<SqliteJobStateStore>> Open(
      const std::string& db_path, SqliteJobStateStoreOptions options = {});

  // The schema steps of the job tables.
  static std::vector<storage::SqliteMigration> SchemaMigrations();

  ~SqliteJobStateStore() override = default;

  // Possible errors: INVALID_ARGUMENT (changes for a job that has no record,
  // or a record whose job_id differs from the batch's; nothing applied),
  // UNAVAILABLE (I/O error, disk full, locked; nothing applied: retry the
  // batch), DATA_LOSS (corruption detected), INTERNAL (a bug).
  absl::Status Apply(const JobChanges& changes) override;
  // All of `batch` in one transaction (one fsync); errors as Apply's, and
  // nothing is applied on error.
  absl::Status ApplyBatch(const std::vector<JobChanges>& batch) override;
  // Every job (sorted by job id) with its nodes (sorted by node id).
  // Possible errors: DATA_LOSS (corrupt file, or rows that contradict each
  // other, e.g. nodes of a missing job or an unknown state number: the message
  // names them), UNAVAILABLE (I/O error).
  absl::StatusOr<std::vector<JobSnapshot>> LoadAll() const override;

 private:
  explicit SqliteJobStateStore(std::unique_ptr<storage::SqliteDatabase> db);

  absl::Status ApplyLocked(const JobChanges& changes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static absl::Status CheckJobId(const JobChanges& changes);
  absl::Status DeleteJobLocked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a removal: keeps the replaced run (JobChanges::archived_run) in
  // job_runs, or drops every past run when there is none (DeleteJob).
  absl::Status ArchiveRunLocked(const JobChanges& changes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<bool> JobExistsLocked(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteJobLocked(const JobRecord& job, const JobCounters& counters)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteFailuresLocked(const JobRecord& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SyncExcludedLocked(const JobRecord& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteCountersLocked(const std::string& job_id, const JobCounters& counters)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteNodesLocked(const JobChanges& changes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LoadAllLocked(std::vector<JobSnapshot>* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DataLoss(absl::string_view what) const;

  const std::string path_;
  const std::string upsert_job_sql_;
  const std::string insert_run_sql_;
  mutable absl::Mutex mu_;
  const std::unique_ptr<storage::SqliteDatabase> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_STORAGE_SQLITE_JOB_STATE_STORE_H_
