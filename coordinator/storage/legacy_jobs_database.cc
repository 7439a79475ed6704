#include "coordinator/storage/legacy_jobs_database.h"

#include <cstdint>
#include <iterator>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "coordinator/storage/sqlite_job_rows.h"

namespace ddp::storage {
namespace {

using rendezvous::FailureInfo;
using rendezvous::JobRecord;
using rendezvous::JobSnapshot;
using rendezvous::NodeRecord;
namespace sqlite_rows = rendezvous::sqlite_rows;

// The schema steps of jobs.db as the earlier releases wrote it (versions 1-5),
// so a file of any of them can be read.
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

std::string Printable(const std::string& id) {
  std::string out = absl::CHexEscape(id.substr(0, 64));
  if (id.size() > 64) absl::StrAppend(&out, "...(", id.size(), " bytes)");
  return out;
}

absl::Status DataLoss(const std::string& path, absl::string_view what) {
  return absl::DataLossError(
      absl::StrFormat("job database %s is inconsistent: %s. It was damaged or edited by hand: "
                      "restore it from a backup, or move it away to start without its jobs",
                      path, what));
}

absl::Status ReadAll(SqliteDatabase& db, const std::string& path, std::vector<JobSnapshot>* out) {
  absl::flat_hash_map<std::string, size_t> index;
  {
    DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                         db.Prepare(absl::StrCat("SELECT ", absl::StrJoin(kJobColumns, ", "),
                                                 " FROM jobs ORDER BY job_id")));
    while (true) {
      DDP_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      JobSnapshot snapshot;
      sqlite_rows::RowReader reader(select);
      std::string error = sqlite_rows::ReadJobRow(reader, &snapshot.job);
      if (!error.empty()) return DataLoss(path, error);
      index[snapshot.job.job_id()] = out->size();
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
                         db.Prepare(absl::StrCat("SELECT ", absl::StrJoin(kJobColumns, ", "),
                                                 " FROM job_runs ORDER BY job_id, run")));
    while (true) {
      DDP_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      JobRecord run;
      sqlite_rows::RowReader reader(select);
      std::string error = sqlite_rows::ReadJobRow(reader, &run);
      if (!error.empty()) return DataLoss(path, absl::StrCat("a past run: ", error));
      JobSnapshot* snapshot = find(run.job_id());
      if (snapshot == nullptr) {
        return DataLoss(path, absl::StrCat("job_runs has rows of job '", Printable(run.job_id()),
                                           "' which has no row"));
      }
      snapshot->past_runs.push_back(std::move(run));
    }
  }
  {
    DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                         db.Prepare(absl::StrCat("SELECT job_id, seq, ", kFailureColumns,
                                                 " FROM job_failures ORDER BY job_id, seq")));
    while (true) {
      DDP_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      sqlite_rows::RowReader reader(select);
      const std::string job_id = reader.Blob();
      JobSnapshot* snapshot = find(job_id);
      if (snapshot == nullptr) {
        return DataLoss(path, absl::StrCat("job_failures has rows of job '", Printable(job_id),
                                           "' which has no row"));
      }
      reader.Int64();  // seq: only orders the rows
      FailureInfo failure;
      std::string error = sqlite_rows::ReadFailure(reader, &failure);
      if (!error.empty()) {
        return DataLoss(path, absl::StrCat("a failure of job '", Printable(job_id), "' ", error));
      }
      *snapshot->job.add_failure_history() = std::move(failure);
    }
  }
  {
    DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                         db.Prepare("SELECT job_id, node_id FROM job_excluded_nodes "
                                    "ORDER BY job_id, node_id"));
    while (true) {
      DDP_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) break;
      const std::string job_id = select.ColumnBlob(0);
      JobSnapshot* snapshot = find(job_id);
      if (snapshot == nullptr) {
        return DataLoss(path, absl::StrCat("job_excluded_nodes has rows of job '",
                                           Printable(job_id), "' which has no row"));
      }
      snapshot->job.add_excluded_nodes(select.ColumnBlob(1));
    }
  }
  DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                       db.Prepare(absl::StrCat("SELECT job_id, ", kNodeColumns,
                                               " FROM job_nodes ORDER BY job_id, node_id")));
  while (true) {
    DDP_ASSIGN_OR_RETURN(bool row, select.Step());
    if (!row) break;
    sqlite_rows::RowReader reader(select);
    const std::string job_id = reader.Blob();
    JobSnapshot* snapshot = find(job_id);
    if (snapshot == nullptr) {
      return DataLoss(path, absl::StrCat("job_nodes has rows of job '", Printable(job_id),
                                         "' which has no row"));
    }
    NodeRecord node = rendezvous::NewNodeRecord("");
    std::string error = sqlite_rows::ReadNode(reader, &node);
    if (!error.empty()) {
      return DataLoss(path, absl::StrCat("node '", Printable(node.node_id()), "' of job '",
                                         Printable(job_id), "' ", error));
    }
    snapshot->nodes.push_back(std::move(node));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<JobSnapshot>> ReadLegacyJobsDatabase(const std::string& path) {
  SqliteDatabaseOptions options;
  options.create_if_missing = false;
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> db, SqliteDatabase::Open(path, options));
  // Older files are brought to the last version of that schema first.
  DDP_RETURN_IF_ERROR(db->Migrate(
      {{1, kSchemaV1}, {2, kSchemaV2}, {3, kSchemaV3}, {4, kSchemaV4}, {5, kSchemaV5}}));
  // One read transaction: every table is read from the same snapshot.
  DDP_RETURN_IF_ERROR(db->Execute("BEGIN"));
  std::vector<JobSnapshot> jobs;
  absl::Status status = ReadAll(*db, path, &jobs);
  if (!db->InAutocommit()) {
    absl::Status end = db->Execute(status.ok() ? "COMMIT" : "ROLLBACK");
    if (status.ok()) status = end;
  }
  if (!status.ok()) return status;
  return jobs;
}

}  // namespace ddp::storage
