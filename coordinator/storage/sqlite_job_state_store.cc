#include "coordinator/storage/sqlite_job_state_store.h"

#include <cstdint>
#include <iterator>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "coordinator/storage/sqlite_job_rows.h"

namespace ddp::rendezvous {
namespace {

using storage::SqliteDatabase;
using storage::SqliteStatement;
using storage::SqliteTransaction;

constexpr char kSchemaV1[] = R"sql(
CREATE TABLE jobs (
  job_id BLOB NOT NULL PRIMARY KEY,
  min_nodes INTEGER NOT NULL,
  max_nodes INTEGER NOT NULL,
  nproc_per_node INTEGER NOT NULL,
  max_restarts INTEGER NOT NULL,
  join_timeout_ms INTEGER NOT NULL,
  last_call_timeout_ms INTEGER NOT NULL,
  heartbeat_interval_ms INTEGER NOT NULL,
  heartbeat_timeout_ms INTEGER NOT NULL,
  shutdown_timeout_ms INTEGER NOT NULL,
  state INTEGER NOT NULL,
  generation INTEGER NOT NULL,
  restart_count INTEGER NOT NULL,
  has_root_cause INTEGER NOT NULL,
  root_cause_node_id BLOB NOT NULL,
  root_cause_generation INTEGER NOT NULL,
  root_cause_local_rank INTEGER NOT NULL,
  root_cause_global_rank INTEGER NOT NULL,
  root_cause_exit_code INTEGER NOT NULL,
  root_cause_signal INTEGER NOT NULL,
  root_cause_message BLOB NOT NULL,
  root_cause_time_ns INTEGER NOT NULL,
  finish_message BLOB NOT NULL,
  master_addr BLOB NOT NULL,
  master_port INTEGER NOT NULL,
  nccl_unique_id BLOB NOT NULL,
  world_size INTEGER NOT NULL,
  last_event_index INTEGER NOT NULL,
  next_join_seq INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE job_failures (
  job_id BLOB NOT NULL,
  seq INTEGER NOT NULL,
  node_id BLOB NOT NULL,
  generation INTEGER NOT NULL,
  local_rank INTEGER NOT NULL,
  global_rank INTEGER NOT NULL,
  exit_code INTEGER NOT NULL,
  signal INTEGER NOT NULL,
  message BLOB NOT NULL,
  time_ns INTEGER NOT NULL,
  PRIMARY KEY (job_id, seq)) WITHOUT ROWID;
CREATE TABLE job_excluded_nodes (
  job_id BLOB NOT NULL,
  node_id BLOB NOT NULL,
  PRIMARY KEY (job_id, node_id)) WITHOUT ROWID;
CREATE TABLE job_nodes (
  job_id BLOB NOT NULL,
  node_id BLOB NOT NULL,
  incarnation INTEGER NOT NULL,
  nproc INTEGER NOT NULL,
  requested_rank INTEGER NOT NULL,
  address BLOB NOT NULL,
  group_rank INTEGER NOT NULL,
  global_rank_offset INTEGER NOT NULL,
  join_seq INTEGER NOT NULL,
  PRIMARY KEY (job_id, node_id)) WITHOUT ROWID;
)sql";

// Version 2: failures say whether they were hangs and which process failed.
// ADD COLUMN with a default: rows written by version 1 read as no hang and
// pid unknown (0), without rewriting them.
constexpr char kSchemaV2[] = R"sql(
ALTER TABLE jobs ADD COLUMN root_cause_hang INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN root_cause_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE job_failures ADD COLUMN hang INTEGER NOT NULL DEFAULT 0;
ALTER TABLE job_failures ADD COLUMN pid INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 3: when the job was created (0: before version 3, unknown).
constexpr char kSchemaV3[] = R"sql(
ALTER TABLE jobs ADD COLUMN created_ns INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 4: runs of a job id. The current run's number and finish time, and
// the finished runs a new run replaced (job_runs: the same columns as jobs,
// one row per past run).
constexpr char kSchemaV4[] = R"sql(
ALTER TABLE jobs ADD COLUMN run INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN finished_ns INTEGER NOT NULL DEFAULT 0;
CREATE TABLE job_runs AS SELECT * FROM jobs WHERE 0;
CREATE UNIQUE INDEX job_runs_by_run ON job_runs (job_id, run);
)sql";

// Version 5: the hash of a job's bearer token (coordinator/auth).
constexpr char kSchemaV5[] = R"sql(
ALTER TABLE jobs ADD COLUMN token_hash BLOB NOT NULL DEFAULT x'';
ALTER TABLE job_runs ADD COLUMN token_hash BLOB NOT NULL DEFAULT x'';
)sql";

// Column lists in the order the row codecs of sqlite_job_rows.h bind and read
// (kInsertFailure and kUpsertNode below list the same columns).
constexpr const char* kJobColumns[] = {
    "job_id",
    "min_nodes",
    "max_nodes",
    "nproc_per_node",
    "max_restarts",
    "join_timeout_ms",
    "last_call_timeout_ms",
    "heartbeat_interval_ms",
    "heartbeat_timeout_ms",
    "shutdown_timeout_ms",
    "state",
    "generation",
    "restart_count",
    "has_root_cause",
    "root_cause_node_id",
    "root_cause_generation",
    "root_cause_local_rank",
    "root_cause_global_rank",
    "root_cause_exit_code",
    "root_cause_signal",
    "root_cause_message",
    "root_cause_time_ns",
    "root_cause_hang",
    "root_cause_pid",
    "finish_message",
    "master_addr",
    "master_port",
    "nccl_unique_id",
    "world_size",
    "last_event_index",
    "next_join_seq",
    "created_ns",
    "run",
    "finished_ns",
    "token_hash",
};
constexpr const char* kFailureColumns =
    "node_id, generation, local_rank, global_rank, exit_code, signal, "
    "message, time_ns, hang, pid";
constexpr const char* kNodeColumns =
    "node_id, incarnation, nproc, requested_rank, address, group_rank, "
    "global_rank_offset, join_seq";

// INSERT ... ON CONFLICT DO UPDATE (not INSERT OR REPLACE): the row is updated
// in place, never deleted and re-inserted.
std::string UpsertJobSql() {
  std::vector<std::string> params;
  std::vector<std::string> updates;
  for (size_t i = 0; i < std::size(kJobColumns); ++i) {
    params.push_back(absl::StrCat("?", i + 1));
    if (i > 0) {
      updates.push_back(absl::StrCat(kJobColumns[i], " = excluded.", kJobColumns[i]));
    }
  }
  return absl::StrCat("INSERT INTO jobs (", absl::StrJoin(kJobColumns, ", "), ") VALUES (",
                      absl::StrJoin(params, ", "), ") ON CONFLICT (job_id) DO UPDATE SET ",
                      absl::StrJoin(updates, ", "));
}

std::string InsertRunSql() {
  std::vector<std::string> params;
  for (size_t i = 0; i < std::size(kJobColumns); ++i) params.push_back(absl::StrCat("?", i + 1));
  return absl::StrCat("INSERT OR REPLACE INTO job_runs (", absl::StrJoin(kJobColumns, ", "),
                      ") VALUES (", absl::StrJoin(params, ", "), ")");
}

constexpr char kSelectJobExists[] = "SELECT 1 FROM jobs WHERE job_id = ?1";
constexpr char kUpdateCounters[] =
    "UPDATE jobs SET last_event_index = ?2, next_join_seq = ?3 "
    "WHERE job_id = ?1";
constexpr char kDeleteJob[] = "DELETE FROM jobs WHERE job_id = ?1";
constexpr char kDeleteJobFailures[] = "DELETE FROM job_failures WHERE job_id = ?1";
constexpr char kDeleteJobExcluded[] = "DELETE FROM job_excluded_nodes WHERE job_id = ?1";
constexpr char kDeleteJobNodes[] = "DELETE FROM job_nodes WHERE job_id = ?1";
constexpr char kDeleteJobRuns[] = "DELETE FROM job_runs WHERE job_id = ?1";
constexpr char kDeleteOldRuns[] = "DELETE FROM job_runs WHERE job_id = ?1 AND run < ?2";
constexpr char kSelectExcluded[] = "SELECT node_id FROM job_excluded_nodes WHERE job_id = ?1";
constexpr char kInsertExcluded[] =
    "INSERT OR IGNORE INTO job_excluded_nodes (job_id, node_id) "
    "VALUES (?1, ?2)";
constexpr char kDeleteExcluded[] =
    "DELETE FROM job_excluded_nodes WHERE job_id = ?1 AND node_id = ?2";
constexpr char kDeleteNode[] = "DELETE FROM job_nodes WHERE job_id = ?1 AND node_id = ?2";

constexpr char kInsertFailure[] =
    "INSERT INTO job_failures (job_id, seq, node_id, generation, local_rank, "
    "global_rank, exit_code, signal, message, time_ns, hang, pid) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";
constexpr char kUpsertNode[] =
    "INSERT OR REPLACE INTO job_nodes (job_id, node_id, incarnation, nproc, "
    "requested_rank, address, group_rank, global_rank_offset, join_seq) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

// A job id for a message: hex-escaped and capped.
std::string Printable(const std::string& id) {
  std::string out = absl::CHexEscape(id.substr(0, 64));
  if (id.size() > 64) absl::StrAppend(&out, "...(", id.size(), " bytes)");
  return out;
}

}  // namespace

std::vector<storage::SqliteMigration> SqliteJobStateStore::SchemaMigrations() {
  return {{1, kSchemaV1}, {2, kSchemaV2}, {3, kSchemaV3}, {4, kSchemaV4}, {5, kSchemaV5}};
}

SqliteJobStateStore::SqliteJobStateStore(std::unique_ptr<SqliteDatabase> db)
    : path_(db->path()),
      upsert_job_sql_(UpsertJobSql()),
      insert_run_sql_(InsertRunSql()),
      db_(std::move(db)) {}

absl::StatusOr<std::unique_ptr<SqliteJobStateStore>> SqliteJobStateStore::Open(
    const std::string& db_path, SqliteJobStateStoreOptions options) {
  storage::SqliteDatabaseOptions db_options;
  db_options.busy_timeout = options.busy_timeout;
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> db,
                       SqliteDatabase::Open(db_path, db_options));
  DDP_RETURN_IF_ERROR(db->Migrate(SchemaMigrations()));
  return std::unique_ptr<SqliteJobStateStore>(new SqliteJobStateStore(std::move(db)));
}

absl::Status SqliteJobStateStore::DataLoss(absl::string_view what) const {
  return absl::DataLossError(
      absl::StrFormat("job database %s is inconsistent: %s. It was damaged or edited by hand: "
                      "restore it from a backup, or move it away to start without jobs",
                      path_, what));
}

absl::Status SqliteJobStateStore::CheckJobId(const JobChanges& changes) {
  if (changes.job && !changes.job_removed && changes.job->job_id != changes.job_id) {
    return absl::InvalidArgumentError(
        absl::StrFormat("JobChanges for job '%s' carries a record of job '%s'; they must "
                        "name the same job",
                        Printable(changes.job_id), Printable(changes.job->job_id)));
  }
  return absl::OkStatus();
}

absl::Status SqliteJobStateStore::Apply(const JobChanges& changes) {
  DDP_RETURN_IF_ERROR(CheckJobId(changes));
  absl::MutexLock lock(&mu_);
  DDP_ASSIGN_OR_RETURN(SqliteTransaction transaction, SqliteTransaction::Begin(*db_));
  // On error the transaction rolls back when it goes out of scope.
  DDP_RETURN_IF_ERROR(ApplyLocked(changes));
  return transaction.Commit();
}

absl::Status SqliteJobStateStore::ApplyBatch(const std::vector<JobChanges>& batch) {
  for (const JobChanges& changes : batch) {
    DDP_RETURN_IF_ERROR(CheckJobId(changes));
  }
  absl::MutexLock lock(&mu_);
  DDP_ASSIGN_OR_RETURN(SqliteTransaction transaction, SqliteTransaction::Begin(*db_));
  for (const JobChanges& changes : batch) {
    DDP_RETURN_IF_ERROR(ApplyLocked(changes));
  }
  return transaction.Commit();
}

absl::Status SqliteJobStateStore::ApplyLocked(const JobChanges& changes) {
  if (changes.job_removed) {
    DDP_RETURN_IF_ERROR(DeleteJobLocked(changes.job_id));
    return ArchiveRunLocked(changes);
  }
  if (changes.job) {
    JobCounters counters = changes.counters.value_or(
        JobCounters{changes.job->last_event_index, changes.job->next_join_seq});
    DDP_RETURN_IF_ERROR(WriteJobLocked(*changes.job, counters));
    DDP_RETURN_IF_ERROR(WriteFailuresLocked(*changes.job));
    DDP_RETURN_IF_ERROR(SyncExcludedLocked(*changes.job));
  } else {
    DDP_ASSIGN_OR_RETURN(bool exists, JobExistsLocked(changes.job_id));
    if (!exists) {
      return absl::InvalidArgumentError(
          absl::StrFormat("node changes for job '%s' which has no record; the first batch of "
                          "a job must carry its record",
                          Printable(changes.job_id)));
    }
    if (changes.counters) {
      DDP_RETURN_IF_ERROR(WriteCountersLocked(changes.job_id, *changes.counters));
    }
  }
  return WriteNodesLocked(changes);
}

absl::Status SqliteJobStateStore::DeleteJobLocked(const std::string& job_id) {
  for (const char* sql : {kDeleteJobNodes, kDeleteJobFailures, kDeleteJobExcluded, kDeleteJob}) {
    DDP_ASSIGN_OR_RETURN(SqliteStatement * statement, db_->PrepareCached(sql));
    DDP_RETURN_IF_ERROR(statement->BindBlob(1, job_id));
    DDP_RETURN_IF_ERROR(statement->Run());
  }
  return absl::OkStatus();
}

absl::Status SqliteJobStateStore::ArchiveRunLocked(const JobChanges& changes) {
  if (!changes.archived_run) {  // DeleteJob: the past runs go too
    DDP_ASSIGN_OR_RETURN(SqliteStatement * statement, db_->PrepareCached(kDeleteJobRuns));
    DDP_RETURN_IF_ERROR(statement->BindBlob(1, changes.job_id));
    return statement->Run();
  }
  DDP_ASSIGN_OR_RETURN(SqliteStatement * drop, db_->PrepareCached(kDeleteOldRuns));
  DDP_RETURN_IF_ERROR(drop->BindBlob(1, changes.job_id));
  DDP_RETURN_IF_ERROR(drop->BindInt64(2, changes.keep_runs_from));
  DDP_RETURN_IF_ERROR(drop->Run());
  DDP_ASSIGN_OR_RETURN(SqliteStatement * insert, db_->PrepareCached(insert_run_sql_));
  const JobRecord& run = *changes.archived_run;
  sqlite_rows::RowBinder binder(*insert);
  DDP_RETURN_IF_ERROR(
      sqlite_rows::BindJobRow(run, JobCounters{run.last_event_index, run.next_join_seq}, binder));
  return insert->Run();
}

absl::StatusOr<bool> SqliteJobStateStore::JobExistsLocked(const std::string& job_id) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement * select, db_->PrepareCached(kSelectJobExists));
  DDP_RETURN_IF_ERROR(select->BindBlob(1, job_id));
  absl::StatusOr<bool> row = select->Step();
  select->Reset();
  return row;
}

absl::Status SqliteJobStateStore::WriteJobLocked(const JobRecord& job,
                                                 const JobCounters& counters) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement * upsert, db_->PrepareCached(upsert_job_sql_));
  sqlite_rows::RowBinder binder(*upsert);
  DDP_RETURN_IF_ERROR(sqlite_rows::BindJobRow(job, counters, binder));
  return upsert->Run();
}

absl::Status SqliteJobStateStore::WriteFailuresLocked(const JobRecord& job) {
  // Bounded by RendezvousLimits::max_retained_failures, and written only with
  // the job record (generation changes, failures), never per join.
  DDP_ASSIGN_OR_RETURN(SqliteStatement * clear, db_->PrepareCached(kDeleteJobFailures));
  DDP_RETURN_IF_ERROR(clear->BindBlob(1, job.job_id));
  DDP_RETURN_IF_ERROR(clear->Run());
  DDP_ASSIGN_OR_RETURN(SqliteStatement * insert, db_->PrepareCached(kInsertFailure));
  for (size_t i = 0; i < job.failures.size(); ++i) {
    sqlite_rows::RowBinder binder(*insert);
    binder.Blob(job.job_id);
    binder.Int(static_cast<int64_t>(i));
    sqlite_rows::BindFailure(job.failures[i], binder);
    DDP_RETURN_IF_ERROR(binder.status());
    DDP_RETURN_IF_ERROR(insert->Run());
  }
  return absl::OkStatus();
}

absl::Status SqliteJobStateStore::SyncExcludedLocked(const JobRecord& job) {
  // The excluded set may hold thousands of ids: write only the differences.
  absl::flat_hash_set<std::string> stored;
  DDP_ASSIGN_OR_RETURN(SqliteStatement * select, db_->PrepareCached(kSelectExcluded));
  DDP_RETURN_IF_ERROR(select->BindBlob(1, job.job_id));
  while (true) {
    absl::StatusOr<bool> row = select->Step();
    if (!row.ok()) {
      select->Reset();
      return row.status();
    }
    if (!*row) break;
    stored.insert(select->ColumnBlob(0));
  }
  select->Reset();
  const absl::flat_hash_set<std::string> wanted(job.excluded_nodes.begin(),
                                                job.excluded_nodes.end());
  DDP_ASSIGN_OR_RETURN(SqliteStatement * remove, db_->PrepareCached(kDeleteExcluded));
  for (const std::string& node_id : stored) {
    if (wanted.contains(node_id)) continue;
    DDP_RETURN_IF_ERROR(remove->BindBlob(1, job.job_id));
    DDP_RETURN_IF_ERROR(remove->BindBlob(2, node_id));
    DDP_RETURN_IF_ERROR(remove->Run());
  }
  DDP_ASSIGN_OR_RETURN(SqliteStatement * insert, db_->PrepareCached(kInsertExcluded));
  for (const std::string& node_id : wanted) {
    if (stored.contains(node_id)) continue;
    DDP_RETURN_IF_ERROR(insert->BindBlob(1, job.job_id));
    DDP_RETURN_IF_ERROR(insert->BindBlob(2, node_id));
    DDP_RETURN_IF_ERROR(insert->Run());
  }
  return absl::OkStatus();
}

absl::Status SqliteJobStateStore::WriteCountersLocked(const std::string& job_id,
                                                      const JobCounters& counters) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement * update, db_->PrepareCached(kUpdateCounters));
  DDP_RETURN_IF_ERROR(update->BindBlob(1, job_id));
  DDP_RETURN_IF_ERROR(update->BindInt64(2, counters.last_event_index));
  DDP_RETURN_IF_ERROR(update->BindInt64(3, sqlite_rows::Uint64Bits(counters.next_join_seq)));
  return update->Run();
}

absl::Status SqliteJobStateStore::WriteNodesLocked(const JobChanges& changes) {
  // Removals first: a batch that removes and re-adds a node ends with the node.
  if (!changes.removed_nodes.empty()) {
    DDP_ASSIGN_OR_RETURN(SqliteStatement * remove, db_->PrepareCached(kDeleteNode));
    for (const std::string& node_id : changes.removed_nodes) {
      DDP_RETURN_IF_ERROR(remove->BindBlob(1, changes.job_id));
      DDP_RETURN_IF_ERROR(remove->BindBlob(2, node_id));
      DDP_RETURN_IF_ERROR(remove->Run());
    }
  }
  if (changes.upserted_nodes.empty()) return absl::OkStatus();
  DDP_ASSIGN_OR_RETURN(SqliteStatement * upsert, db_->PrepareCached(kUpsertNode));
  for (const NodeRecord& node : changes.upserted_nodes) {
    sqlite_rows::RowBinder binder(*upsert);
    binder.Blob(changes.job_id);
    DDP_RETURN_IF_ERROR(sqlite_rows::BindNode(node, binder));
    DDP_RETURN_IF_ERROR(upsert->Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JobSnapshot>> SqliteJobStateStore::LoadAll() const {
  absl::MutexLock lock(&mu_);
  // One read transaction: every table is read from the same snapshot.
  DDP_RETURN_IF_ERROR(db_->Execute("BEGIN"));
  std::vector<JobSnapshot> jobs;
  absl::Status status = LoadAllLocked(&jobs);
  if (!db_->InAutocommit()) {
    absl::Status end = db_->Execute(status.ok() ? "COMMIT" : "ROLLBACK");
    if (status.ok()) status = end;
  }
  if (!status.ok()) return status;
  return jobs;
}

absl::Status SqliteJobStateStore::LoadAllLocked(std::vector<JobSnapshot>* out) const {
  absl::flat_hash_map<std::string, size_t> index;
  {
    DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                         db_->Prepare(absl::StrCat("SELECT ", absl::StrJoin(kJobColumns, ", "),
                                                   " FROM jobs ORDER BY job_id")));
    while (true) {
      DDP_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      JobSnapshot snapshot;
      sqlite_rows::RowReader reader(select);
      std::string error = sqlite_rows::ReadJobRow(reader, &snapshot.job);
      if (!error.empty()) return DataLoss(error);
      index[snapshot.job.job_id] = out->size();
      out->push_back(std::move(snapshot));
    }
  }
  // Returns the snapshot of `job_id`, or null when the job has no row.
  auto find = [&](const std::string& job_id) -> JobSnapshot* {
    auto it = index.find(job_id);
    return it == index.end() ? nullptr : &(*out)[it->second];
  };
  {
    DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                         db_->Prepare(absl::StrCat("SELECT ", absl::StrJoin(kJobColumns, ", "),
                                                   " FROM job_runs ORDER BY job_id, run")));
    while (true) {
      DDP_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      JobRecord run;
      sqlite_rows::RowReader reader(select);
      std::string error = sqlite_rows::ReadJobRow(reader, &run);
      if (!error.empty()) return DataLoss(absl::StrCat("a past run: ", error));
      JobSnapshot* snapshot = find(run.job_id);
      if (snapshot == nullptr) {
        return DataLoss(absl::StrCat("job_runs has rows of job '", Printable(run.job_id),
                                     "' which has no row"));
      }
      snapshot->past_runs.push_back(std::move(run));
    }
  }
  {
    DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                         db_->Prepare(absl::StrCat("SELECT job_id, seq, ", kFailureColumns,
                                                   " FROM job_failures ORDER BY job_id, seq")));
    while (true) {
      DDP_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      sqlite_rows::RowReader reader(select);
      const std::string job_id = reader.Blob();
      JobSnapshot* snapshot = find(job_id);
      if (snapshot == nullptr) {
        return DataLoss(absl::StrCat("job_failures has rows of job '", Printable(job_id),
                                     "' which has no row"));
      }
      reader.Int64();  // seq: only orders the rows
      FailureInfo failure;
      std::string error = sqlite_rows::ReadFailure(reader, &failure);
      if (!error.empty()) {
        return DataLoss(absl::StrCat("a failure of job '", Printable(job_id), "' ", error));
      }
      snapshot->job.failures.push_back(std::move(failure));
    }
  }
  {
    DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                         db_->Prepare("SELECT job_id, node_id FROM job_excluded_nodes "
                                      "ORDER BY job_id, node_id"));
    while (true) {
      DDP_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      const std::string job_id = select.ColumnBlob(0);
      JobSnapshot* snapshot = find(job_id);
      if (snapshot == nullptr) {
        return DataLoss(absl::StrCat("job_excluded_nodes has rows of job '", Printable(job_id),
                                     "' which has no row"));
      }
      snapshot->job.excluded_nodes.push_back(select.ColumnBlob(1));
    }
  }
  DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                       db_->Prepare(absl::StrCat("SELECT job_id, ", kNodeColumns,
                                                 " FROM job_nodes ORDER BY job_id, node_id")));
  while (true) {
    DDP_ASSIGN_OR_RETURN(bool row, select.Step());
    if (!row) break;
    sqlite_rows::RowReader reader(select);
    const std::string job_id = reader.Blob();
    JobSnapshot* snapshot = find(job_id);
    if (snapshot == nullptr) {
      return DataLoss(
          absl::StrCat("job_nodes has rows of job '", Printable(job_id), "' which has no row"));
    }
    NodeRecord node;
    std::string error = sqlite_rows::ReadNode(reader, &node);
    if (!error.empty()) {
      return DataLoss(absl::StrCat("node '", Printable(node.node_id), "' of job '",
                                   Printable(job_id), "' ", error));
    }
    snapshot->nodes.push_back(std::move(node));
  }
  return absl::OkStatus();
}

}  // namespace ddp::rendezvous

#undef JOBS_RETURN_IF_ERROR
