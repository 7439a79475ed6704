#include "coordinator/storage/sqlite_kv_backend.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/storage/write_batch_checks.h"

namespace ddp::kv {
namespace {

using storage::SqliteDatabase;
using storage::SqliteStatement;
using storage::SqliteTransaction;

constexpr char kSchemaV1[] = R"sql(
CREATE TABLE kv_meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  revision INTEGER NOT NULL,
  compacted_revision INTEGER NOT NULL,
  next_lease_id INTEGER NOT NULL);
INSERT INTO kv_meta (id, revision, compacted_revision, next_lease_id) VALUES (1, 0, 0, 1);
CREATE TABLE kv_keys (
  ns BLOB NOT NULL,
  key BLOB NOT NULL,
  value BLOB NOT NULL,
  create_revision INTEGER NOT NULL,
  mod_revision INTEGER NOT NULL,
  version INTEGER NOT NULL,
  lease INTEGER NOT NULL,
  PRIMARY KEY (ns, key)) WITHOUT ROWID;
CREATE TABLE kv_events (
  id INTEGER PRIMARY KEY,
  revision INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  type INTEGER NOT NULL,
  ns BLOB NOT NULL,
  key BLOB NOT NULL,
  value BLOB NOT NULL,
  create_revision INTEGER NOT NULL,
  version INTEGER NOT NULL,
  lease INTEGER NOT NULL);
CREATE INDEX kv_events_by_ns_revision ON kv_events (ns, revision, seq);
CREATE TABLE kv_leases (
  id INTEGER PRIMARY KEY,
  ttl_ms INTEGER NOT NULL);
)sql";

// kv_keys is written late (see sqlite_kv_backend_deferred_keys.h): it is
// complete up to keys_revision. A version 1 file wrote it in every commit.
constexpr char kSchemaV2[] = R"sql(
ALTER TABLE kv_meta ADD COLUMN keys_revision INTEGER NOT NULL DEFAULT 0;
UPDATE kv_meta SET keys_revision = revision;
)sql";

constexpr char kUpsertKey[] =
    "INSERT OR REPLACE INTO kv_keys (ns, key, value, create_revision, "
    "mod_revision, "
    "version, lease) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
constexpr char kDeleteKey[] = "DELETE FROM kv_keys WHERE ns = ?1 AND key = ?2";
constexpr char kInsertEvent[] =
    "INSERT INTO kv_events (revision, seq, type, ns, key, value, "
    "create_revision, "
    "version, lease) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
constexpr char kUpsertLease[] = "INSERT OR REPLACE INTO kv_leases (id, ttl_ms) VALUES (?1, ?2)";
constexpr char kDeleteLease[] = "DELETE FROM kv_leases WHERE id = ?1";
constexpr char kUpdateMeta[] =
    "UPDATE kv_meta SET revision = ?1, next_lease_id = ?2, compacted_revision "
    "= ?3, keys_revision = ?4 WHERE id = 1";
constexpr char kSelectMeta[] =
    "SELECT revision, compacted_revision, next_lease_id, keys_revision, "
    "(SELECT COUNT(*) FROM kv_meta) FROM kv_meta WHERE id = 1";
}  // namespace

std::vector<storage::SqliteMigration> SqliteKvBackend::SchemaMigrations() {
  return {{1, kSchemaV1}, {2, kSchemaV2}};
}

SqliteKvBackend::SqliteKvBackend(SqliteKvBackendOptions options,
                                 std::unique_ptr<SqliteDatabase> write_db,
                                 std::unique_ptr<SqliteDatabase> read_db,
                                 std::unique_ptr<SqliteDatabase> checkpoint_db)
    : options_(options),
      path_(write_db->path()),
      write_db_(std::move(write_db)),
      deferred_([&] {
        DeferredKeyWritesOptions deferred = options.deferred_keys;
        // The maintenance thread sorts sealed generations, off the commits.
        deferred.background_sort = checkpoint_db != nullptr;
        return deferred;
      }()),
      read_db_(std::move(read_db)),
      checkpoint_db_(std::move(checkpoint_db)) {
  if (checkpoint_db_ != nullptr) {
    absl::MutexLock lock(&write_mu_);
    // Replaces SQLite's automatic checkpoint (itself a WAL hook), which is off.
    sqlite3_wal_hook(write_db_->handle(), &SqliteKvBackend::OnWalCommit, this);
    maintenance_thread_ = std::thread([this] { MaintenanceLoop(); });
  }
}

SqliteKvBackend::~SqliteKvBackend() {
  {
    absl::MutexLock lock(&maintenance_mu_);
    stopping_ = true;
  }
  if (maintenance_thread_.joinable()) maintenance_thread_.join();
  absl::MutexLock lock(&write_mu_);
  if (deferred_.active_size() + deferred_.sealed_left() == 0) return;
  // Not needed for durability (a reopened store replays the events), but a
  // cleanly closed file then opens without a replay.
  const absl::Status status = WriteAllDeferredLocked();
  if (!status.ok()) {
    DDP_LOG(WARNING) << "writing the deferred keys of " << path_
                     << " at close failed (the next open replays them): " << status;
  }
}

absl::StatusOr<std::unique_ptr<SqliteKvBackend>> SqliteKvBackend::Open(
    const std::string& db_path, SqliteKvBackendOptions options) {
  if (options.cache_size_kib < 0 || options.checkpoint_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("SqliteKvBackendOptions: cache_size_kib (%d) and checkpoint_interval (%s) "
                        "must not be negative",
                        options.cache_size_kib, absl::FormatDuration(options.checkpoint_interval)));
  }
  if (options.compaction_chunk_events < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("SqliteKvBackendOptions.compaction_chunk_events is %d; "
                        "it must be at least 1",
                        options.compaction_chunk_events));
  }
  storage::SqliteDatabaseOptions db_options;
  db_options.busy_timeout = options.busy_timeout;
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> write_db,
                       SqliteDatabase::Open(db_path, db_options));
  DDP_RETURN_IF_ERROR(
      write_db->Migrate(options.schema.empty() ? SchemaMigrations() : options.schema));
  DDP_RETURN_IF_ERROR(
      write_db->Execute(absl::StrFormat("PRAGMA cache_size=-%d", options.cache_size_kib)));
  db_options.create_if_missing = false;
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> read_db,
                       SqliteDatabase::Open(db_path, db_options));
  std::unique_ptr<SqliteDatabase> checkpoint_db;
  if (options.checkpoint_interval > absl::ZeroDuration()) {
    if (options.wal_restart_frames < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("SqliteKvBackendOptions.wal_restart_frames is %d; it must be at "
                          "least 1",
                          options.wal_restart_frames));
    }
    DDP_RETURN_IF_ERROR(write_db->Execute("PRAGMA wal_autocheckpoint=0"));
    const absl::StatusOr<int64_t> page_size = write_db->QueryInt64("PRAGMA page_size");
    if (!page_size.ok()) return page_size.status();
    DDP_RETURN_IF_ERROR(write_db->Execute(absl::StrFormat(
        "PRAGMA journal_size_limit=%d", 2 * *page_size * options.wal_restart_frames)));
    DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> opened,
                         SqliteDatabase::Open(db_path, db_options));
    checkpoint_db = std::move(opened);
  }

  std::unique_ptr<SqliteKvBackend> backend(new SqliteKvBackend(
      options, std::move(write_db), std::move(read_db), std::move(checkpoint_db)));
  {
    absl::MutexLock lock(&backend->write_mu_);
    DDP_ASSIGN_OR_RETURN(Meta meta, backend->ReadMetaLocked());
    backend->meta_ = meta;
    backend->deferred_.Reset(meta.keys_revision, meta.revision, {});
  }
  DDP_RETURN_IF_ERROR(backend->DeleteAllCompacted());
  return backend;
}

absl::Status SqliteKvBackend::DataLoss(absl::string_view what) const {
  return absl::DataLossError(
      absl::StrFormat("KV database %s is inconsistent: %s. It was damaged or edited by hand: "
                      "restore it "
                      "from a backup, or move it away to start with an empty store",
                      path_, what));
}

absl::StatusOr<SqliteKvBackend::Meta> SqliteKvBackend::ReadMetaLocked() {
  DDP_ASSIGN_OR_RETURN(SqliteStatement * select, write_db_->PrepareCached(kSelectMeta));
  DDP_ASSIGN_OR_RETURN(bool row, select->Step());
  if (!row) return DataLoss("the kv_meta row is missing");
  Meta meta;
  meta.revision = select->ColumnInt64(0);
  meta.compacted_revision = select->ColumnInt64(1);
  meta.next_lease_id = select->ColumnInt64(2);
  meta.keys_revision = select->ColumnInt64(3);
  const int64_t rows = select->ColumnInt64(4);
  select->Reset();
  if (rows != 1) return DataLoss(absl::StrFormat("kv_meta has %d rows, expected 1", rows));
  if (meta.revision < 0) {
    return DataLoss(absl::StrFormat("the revision is negative (%d)", meta.revision));
  }
  if (meta.compacted_revision < 0 || meta.compacted_revision > meta.revision) {
    return DataLoss(absl::StrFormat("the compacted revision %d is outside [0, revision %d]",
                                    meta.compacted_revision, meta.revision));
  }
  if (meta.next_lease_id < 1) {
    return DataLoss(
        absl::StrFormat("next_lease_id is %d; it must be at least 1", meta.next_lease_id));
  }
  if (meta.keys_revision < 0 || meta.keys_revision > meta.revision) {
    return DataLoss(absl::StrFormat("the keys revision %d is outside [0, revision %d]",
                                    meta.keys_revision, meta.revision));
  }
  return meta;
}

absl::Status SqliteKvBackend::Commit(const KvWriteBatch& batch) { return CommitWith(&batch, {}); }

absl::Status SqliteKvBackend::CommitWith(const KvWriteBatch* batch, const OtherTables& also) {
  absl::MutexLock lock(&write_mu_);
  if (batch == nullptr) {  // the other tables alone
    DDP_ASSIGN_OR_RETURN(SqliteTransaction transaction, SqliteTransaction::Begin(*write_db_));
    DDP_RETURN_IF_ERROR(also(*write_db_));
    DDP_RETURN_IF_ERROR(transaction.Commit());
    MaybeRestartWalLocked();
    return absl::OkStatus();
  }
  DDP_RETURN_IF_ERROR(CheckWriteBatch(*batch, meta_.revision));
  const absl::Span<const KeyChange> slice =
      deferred_.NextSlice(batch->upserts.size() + batch->deletes.size());
  Meta next = meta_;
  next.revision = batch->revision;
  if (batch->next_lease_id != 0) next.next_lease_id = batch->next_lease_id;
  next.keys_revision = deferred_.KeysRevisionAfter(slice.size(), *batch);
  DDP_ASSIGN_OR_RETURN(SqliteTransaction transaction, SqliteTransaction::Begin(*write_db_));
  DDP_RETURN_IF_ERROR(ApplyBatchLocked(*batch));
  DDP_RETURN_IF_ERROR(WriteKeysLocked(slice));
  DDP_RETURN_IF_ERROR(UpdateMetaLocked(next));
  if (also) DDP_RETURN_IF_ERROR(also(*write_db_));
  bool compaction_done = !compaction_backlog_;
  if (!compaction_done) {
    const int64_t limit = std::max<int64_t>(256, 2 * static_cast<int64_t>(batch->events.size()));
    DDP_RETURN_IF_ERROR(DeleteCompactedLocked(limit, &compaction_done));
  }
  DDP_RETURN_IF_ERROR(transaction.Commit());
  // kv_keys caught up past the compacted revision: those events can go too.
  compaction_backlog_ = !compaction_done || (next.keys_revision > meta_.keys_revision &&
                                             meta_.compacted_revision > meta_.keys_revision);
  meta_ = next;
  ++commits_;
  deferred_.Committed(slice.size(), *batch);
  if (deferred_.NeedsSort()) {
    absl::MutexLock lock(&maintenance_mu_);
    sort_wanted_ = true;
  }
  MaybeRestartWalLocked();
  return absl::OkStatus();
}

absl::Status SqliteKvBackend::ReadOtherTables(const OtherTables& read) {
  absl::MutexLock lock(&write_mu_);
  return read(*write_db_);
}

absl::Status SqliteKvBackend::ApplyBatchLocked(const KvWriteBatch& batch) {
  SqliteDatabase& db = *write_db_;
  DDP_ASSIGN_OR_RETURN(SqliteStatement * insert_event, db.PrepareCached(kInsertEvent));
  int64_t seq = 0;
  for (size_t i = 0; i < batch.events.size(); ++i) {
    const Event& event = batch.events[i];
    seq = (i > 0 && batch.events[i - 1].revision() == event.revision()) ? seq + 1 : 0;
    SqliteStatement& s = *insert_event;
    DDP_RETURN_IF_ERROR(s.BindInt64(1, event.revision()));
    DDP_RETURN_IF_ERROR(s.BindInt64(2, seq));
    DDP_RETURN_IF_ERROR(s.BindInt64(3, static_cast<int64_t>(event.type)));
    DDP_RETURN_IF_ERROR(s.BindBlob(4, event.kv.ns));
    DDP_RETURN_IF_ERROR(s.BindBlob(5, event.kv.key));
    DDP_RETURN_IF_ERROR(s.BindBlob(6, event.kv.value));
    DDP_RETURN_IF_ERROR(s.BindInt64(7, event.kv.create_revision));
    DDP_RETURN_IF_ERROR(s.BindInt64(8, event.kv.version));
    DDP_RETURN_IF_ERROR(s.BindInt64(9, event.kv.lease));
    DDP_RETURN_IF_ERROR(s.Run());
  }
  DDP_ASSIGN_OR_RETURN(SqliteStatement * grant, db.PrepareCached(kUpsertLease));
  for (const LeaseRecord& lease : batch.lease_grants) {
    DDP_RETURN_IF_ERROR(grant->BindInt64(1, lease.id));
    DDP_RETURN_IF_ERROR(grant->BindInt64(2, lease.ttl_ms));
    DDP_RETURN_IF_ERROR(grant->Run());
  }
  DDP_ASSIGN_OR_RETURN(SqliteStatement * revoke, db.PrepareCached(kDeleteLease));
  for (LeaseId id : batch.lease_revokes) {
    DDP_RETURN_IF_ERROR(revoke->BindInt64(1, id));
    DDP_RETURN_IF_ERROR(revoke->Run());
  }
  return absl::OkStatus();
}

absl::Status SqliteKvBackend::WriteKeysLocked(absl::Span<const KeyChange> changes) {
  if (changes.empty()) return absl::OkStatus();
  SqliteDatabase& db = *write_db_;
  DDP_ASSIGN_OR_RETURN(SqliteStatement * upsert, db.PrepareCached(kUpsertKey));
  DDP_ASSIGN_OR_RETURN(SqliteStatement * remove, db.PrepareCached(kDeleteKey));
  for (const auto& [ref, state] : changes) {
    if (!state) {
      DDP_RETURN_IF_ERROR(remove->BindBlob(1, ref.first));
      DDP_RETURN_IF_ERROR(remove->BindBlob(2, ref.second));
      DDP_RETURN_IF_ERROR(remove->Run());
      continue;
    }
    SqliteStatement& s = *upsert;
    DDP_RETURN_IF_ERROR(s.BindBlob(1, state->ns));
    DDP_RETURN_IF_ERROR(s.BindBlob(2, state->key));
    DDP_RETURN_IF_ERROR(s.BindBlob(3, state->value));
    DDP_RETURN_IF_ERROR(s.BindInt64(4, state->create_revision));
    DDP_RETURN_IF_ERROR(s.BindInt64(5, state->mod_revision));
    DDP_RETURN_IF_ERROR(s.BindInt64(6, state->version));
    DDP_RETURN_IF_ERROR(s.BindInt64(7, state->lease));
    DDP_RETURN_IF_ERROR(s.Run());
  }
  return absl::OkStatus();
}

absl::Status SqliteKvBackend::UpdateMetaLocked(const Meta& meta) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement * update, write_db_->PrepareCached(kUpdateMeta));
  DDP_RETURN_IF_ERROR(update->BindInt64(1, meta.revision));
  DDP_RETURN_IF_ERROR(update->BindInt64(2, meta.next_lease_id));
  DDP_RETURN_IF_ERROR(update->BindInt64(3, meta.compacted_revision));
  DDP_RETURN_IF_ERROR(update->BindInt64(4, meta.keys_revision));
  DDP_RETURN_IF_ERROR(update->Run());
  if (write_db_->ChangedRows() != 1) {
    return DataLoss("the kv_meta row is missing");
  }
  return absl::OkStatus();
}

absl::Status SqliteKvBackend::WriteAllDeferredLocked() {
  DDP_ASSIGN_OR_RETURN(SqliteTransaction transaction, SqliteTransaction::Begin(*write_db_));
  DDP_RETURN_IF_ERROR(WriteKeysLocked(deferred_.All()));
  Meta next = meta_;
  next.keys_revision = meta_.revision;
  DDP_RETURN_IF_ERROR(UpdateMetaLocked(next));
  DDP_RETURN_IF_ERROR(transaction.Commit());
  meta_ = next;
  deferred_.Reset(meta_.keys_revision, meta_.revision, {});
  return absl::OkStatus();
}

}  // namespace ddp::kv
