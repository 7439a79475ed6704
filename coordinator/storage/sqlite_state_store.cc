#include "coordinator/storage/sqlite_state_store.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/storage/legacy_jobs_database.h"
#include "coordinator/storage/sqlite_job_tables.h"

namespace ddp::storage {
namespace {

// Which earlier files were imported, so that a crash between the import's
// commit and the rename of the old file does not import it twice.
constexpr char kImportsSchema[] = R"sql(
CREATE TABLE state_imports (
  source TEXT PRIMARY KEY,
  imported_unix_ms INTEGER NOT NULL,
  jobs INTEGER NOT NULL);
)sql";

constexpr char kJobsImport[] = "jobs.db";

// The fleet's node records (schema version 5): node_id -> v1::Node.
constexpr char kFleetNodesSchema[] = R"sql(
CREATE TABLE fleet_nodes (
  node_id BLOB PRIMARY KEY,
  record BLOB NOT NULL) WITHOUT ROWID;
)sql";

// The fleet's settings (schema version 6): name -> record; today one row,
// kQuarantinePolicyRow -> v1::QuarantinePolicy, once set through the API.
constexpr char kFleetSettingsSchema[] = R"sql(
CREATE TABLE fleet_settings (
  name TEXT PRIMARY KEY,
  record BLOB NOT NULL) WITHOUT ROWID;
)sql";

constexpr char kQuarantinePolicyRow[] = "quarantine_policy";

absl::Status WriteQuarantinePolicy(SqliteDatabase& db,
                                   const std::optional<v1::QuarantinePolicy>& policy) {
  if (!policy) return absl::OkStatus();
  DDP_ASSIGN_OR_RETURN(
      SqliteStatement * upsert,
      db.PrepareCached("INSERT OR REPLACE INTO fleet_settings (name, record) VALUES (?1, ?2)"));
  upsert->Reset();
  DDP_RETURN_IF_ERROR(upsert->BindBlob(1, kQuarantinePolicyRow));
  DDP_RETURN_IF_ERROR(upsert->BindBlob(2, policy->SerializeAsString()));
  return upsert->Run();
}

absl::Status WriteNodes(SqliteDatabase& db, const std::vector<v1::Node>& nodes) {
  if (nodes.empty()) return absl::OkStatus();
  DDP_ASSIGN_OR_RETURN(
      SqliteStatement * upsert,
      db.PrepareCached("INSERT OR REPLACE INTO fleet_nodes (node_id, record) VALUES (?1, ?2)"));
  for (const v1::Node& node : nodes) {
    upsert->Reset();
    DDP_RETURN_IF_ERROR(upsert->BindBlob(1, node.node_id()));
    DDP_RETURN_IF_ERROR(upsert->BindBlob(2, node.SerializeAsString()));
    DDP_RETURN_IF_ERROR(upsert->Run());
  }
  return absl::OkStatus();
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::StatusOr<bool> AlreadyImported(SqliteDatabase& db) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                       db.Prepare("SELECT 1 FROM state_imports WHERE source = ?1"));
  DDP_RETURN_IF_ERROR(select.BindBlob(1, kJobsImport));
  return select.Step();
}

// A whole stored job as the changes that create it.
rendezvous::JobChanges Creating(const rendezvous::JobSnapshot& snapshot) {
  rendezvous::JobChanges changes;
  changes.job_id = snapshot.job.job_id();
  changes.job = snapshot.job;
  changes.upserted_nodes = snapshot.nodes;
  return changes;
}

}  // namespace

absl::StatusOr<bool> ExpectsLegacyJobsDatabase(const std::string& state_db_path,
                                               const std::string& jobs_db_path) {
  if (Exists(jobs_db_path)) return true;
  struct stat st;
  if (stat(state_db_path.c_str(), &st) != 0 || st.st_size == 0) return false;
  SqliteDatabaseOptions options;
  options.create_if_missing = false;
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> db,
                       SqliteDatabase::Open(state_db_path, options));
  DDP_ASSIGN_OR_RETURN(int64_t version, db->UserVersion());
  // Versions 1-2: the KV tables alone, beside a jobs.db.
  return version >= 1 && version < 3;
}

std::vector<SqliteMigration> SqliteStateStore::SchemaMigrations() {
  std::vector<SqliteMigration> steps = kv::SqliteKvBackend::SchemaMigrations();
  steps.push_back({3, absl::StrCat(kJobTablesSchema, kImportsSchema)});
  steps.push_back({4, kJobEventTablesSchema});
  steps.push_back({5, kFleetNodesSchema});
  steps.push_back({6, kFleetSettingsSchema});
  return steps;
}

absl::StatusOr<std::unique_ptr<SqliteStateStore>> SqliteStateStore::Open(
    const std::string& db_path, kv::SqliteKvBackendOptions options) {
  options.schema = SchemaMigrations();
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<kv::SqliteKvBackend> kv,
                       kv::SqliteKvBackend::Open(db_path, std::move(options)));
  return std::unique_ptr<SqliteStateStore>(new SqliteStateStore(std::move(kv)));
}

absl::Status SqliteStateStore::CommitState(const commit::StateBatch& batch) {
  if (batch.empty()) return absl::OkStatus();
  auto write_jobs = [&batch](SqliteDatabase& db) -> absl::Status {
    rendezvous::JobEventCounts appended;  // one row per (type, cause) per batch
    for (const rendezvous::JobChanges& changes : batch.jobs) {
      DDP_RETURN_IF_ERROR(WriteJobChanges(db, changes));
      if (changes.job_removed) continue;
      for (const rendezvous::JobEvent& event : changes.appended_events) appended.Add(event);
    }
    DDP_RETURN_IF_ERROR(AddEventCounts(db, appended));
    DDP_RETURN_IF_ERROR(WriteNodes(db, batch.nodes));
    return WriteQuarantinePolicy(db, batch.quarantine_policy);
  };
  return kv_->CommitWith(batch.kv ? &*batch.kv : nullptr, write_jobs);
}

absl::StatusOr<std::vector<rendezvous::JobSnapshot>> SqliteStateStore::LoadAll() const {
  std::vector<rendezvous::JobSnapshot> jobs;
  DDP_RETURN_IF_ERROR(kv_->ReadOtherTables([&jobs](SqliteDatabase& db) -> absl::Status {
    DDP_ASSIGN_OR_RETURN(jobs, ReadJobSnapshots(db));
    return absl::OkStatus();
  }));
  return jobs;
}

absl::StatusOr<rendezvous::JobEventCounts> SqliteStateStore::LoadEventCounts() const {
  rendezvous::JobEventCounts counts;
  DDP_RETURN_IF_ERROR(kv_->ReadOtherTables([&counts](SqliteDatabase& db) -> absl::Status {
    DDP_ASSIGN_OR_RETURN(counts, ReadEventCounts(db));
    return absl::OkStatus();
  }));
  return counts;
}

absl::StatusOr<std::vector<v1::Node>> SqliteStateStore::LoadNodes() const {
  std::vector<v1::Node> nodes;
  DDP_RETURN_IF_ERROR(kv_->ReadOtherTables([&nodes](SqliteDatabase& db) -> absl::Status {
    DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                         db.Prepare("SELECT node_id, record FROM fleet_nodes ORDER BY node_id"));
    while (true) {
      DDP_ASSIGN_OR_RETURN(bool row, select.Step());
      if (!row) return absl::OkStatus();
      v1::Node node;
      if (!node.ParseFromString(select.ColumnBlob(1)) || node.node_id() != select.ColumnBlob(0)) {
        return absl::DataLossError(absl::StrCat("the fleet record of node '",
                                                absl::CHexEscape(select.ColumnBlob(0)),
                                                "' does not decode"));
      }
      nodes.push_back(std::move(node));
    }
  }));
  return nodes;
}

absl::StatusOr<std::optional<v1::QuarantinePolicy>> SqliteStateStore::LoadQuarantinePolicy() const {
  std::optional<v1::QuarantinePolicy> policy;
  DDP_RETURN_IF_ERROR(kv_->ReadOtherTables([&policy](SqliteDatabase& db) -> absl::Status {
    DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                         db.Prepare("SELECT record FROM fleet_settings WHERE name = ?1"));
    DDP_RETURN_IF_ERROR(select.BindBlob(1, kQuarantinePolicyRow));
    DDP_ASSIGN_OR_RETURN(bool row, select.Step());
    if (!row) return absl::OkStatus();
    policy.emplace();
    if (!policy->ParseFromString(select.ColumnBlob(0))) {
      return absl::DataLossError("the stored quarantine policy (fleet_settings) does not decode");
    }
    return absl::OkStatus();
  }));
  return policy;
}

absl::StatusOr<int> SqliteStateStore::ImportJobsDatabase(const std::string& jobs_db_path) {
  if (!Exists(jobs_db_path)) return 0;
  bool imported = false;
  DDP_RETURN_IF_ERROR(kv_->ReadOtherTables([&imported](SqliteDatabase& db) -> absl::Status {
    DDP_ASSIGN_OR_RETURN(imported, AlreadyImported(db));
    return absl::OkStatus();
  }));
  int count = 0;
  if (!imported) {
    absl::StatusOr<std::vector<rendezvous::JobSnapshot>> loaded =
        ReadLegacyJobsDatabase(jobs_db_path);
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(), absl::StrCat("cannot import ", jobs_db_path, ": ",
                                                               loaded.status().message()));
    }
    std::vector<rendezvous::JobSnapshot> jobs = *std::move(loaded);
    count = static_cast<int>(jobs.size());
    DDP_RETURN_IF_ERROR(kv_->CommitWith(nullptr, [&](SqliteDatabase& db) -> absl::Status {
      DDP_ASSIGN_OR_RETURN(bool again, AlreadyImported(db));
      if (again) return absl::OkStatus();
      for (const rendezvous::JobSnapshot& job : jobs) {
        DDP_RETURN_IF_ERROR(WriteJobChanges(db, Creating(job)));
        for (const rendezvous::JobRecord& run : job.past_runs) {
          DDP_RETURN_IF_ERROR(WritePastRun(db, run));
        }
      }
      DDP_ASSIGN_OR_RETURN(
          SqliteStatement mark,
          db.Prepare("INSERT INTO state_imports (source, imported_unix_ms, jobs) VALUES "
                     "(?1, CAST(strftime('%s','now') AS INTEGER) * 1000, ?2)"));
      DDP_RETURN_IF_ERROR(mark.BindBlob(1, kJobsImport));
      DDP_RETURN_IF_ERROR(mark.BindInt64(2, count));
      return mark.Run();
    }));
  }
  // The old file (and its WAL) is kept beside, renamed: nothing reads it again.
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string from = absl::StrCat(jobs_db_path, suffix);
    const std::string to = absl::StrCat(jobs_db_path, ".imported", suffix);
    if (Exists(from) && std::rename(from.c_str(), to.c_str()) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("cannot rename ", from, " to ", to, ": ",
                                                        std::strerror(errno),
                                                        "; check the data dir's permissions"));
    }
  }
  if (!imported) {
    DDP_LOG(INFO) << "imported " << count << " jobs from " << jobs_db_path << " (kept as "
                  << jobs_db_path << ".imported)";
  }
  return count;
}

}  // namespace ddp::storage
