#include "coordinator/storage/sqlite_kv_backend.h"

#include <pthread.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
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

// ---- Reads ----

// The events kv_keys does not reflect yet, in commit order.
constexpr char kSelectEventsAfter[] =
    "SELECT type, ns, key, value, create_revision, revision, version, lease "
    "FROM kv_events WHERE revision > ?1 ORDER BY id";
// ?4 NULL: no upper bound (the prefix is empty or all 0xFF bytes).
constexpr char kSelectEvents[] =
    "SELECT type, key, value, create_revision, revision, version, lease FROM "
    "kv_events "
    "WHERE ns = ?1 AND revision >= ?2 AND key >= ?3 AND (?4 IS NULL OR key < "
    "?4) "
    "ORDER BY revision, seq LIMIT ?5";

// The smallest byte string greater than every string that starts with `prefix`,
// or false when there is none (empty prefix, or only 0xFF bytes).
bool PrefixUpperBound(const std::string& prefix, std::string* bound) {
  std::string result = prefix;
  while (!result.empty() && static_cast<unsigned char>(result.back()) == 0xFF) {
    result.pop_back();
  }
  if (result.empty()) return false;
  result.back() = static_cast<char>(static_cast<unsigned char>(result.back()) + 1);
  *bound = std::move(result);
  return true;
}

// ---- Background work ----

// Events are inserted in revision order, so the rows with the smallest ids are
// the oldest: look at the first chunk only and delete the compacted ones among
// them.
constexpr char kDeleteCompactedChunk[] =
    "DELETE FROM kv_events WHERE id IN (SELECT id FROM kv_events ORDER BY id "
    "LIMIT ?2) "
    "AND revision <= ?1";

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
  db_options.sync_timing = options.sync_timing;
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> write_db,
                       SqliteDatabase::Open(db_path, db_options));
  DDP_RETURN_IF_ERROR(
      write_db->Migrate(options.schema.empty() ? SchemaMigrations() : options.schema));
  DDP_RETURN_IF_ERROR(
      write_db->Execute(absl::StrFormat("PRAGMA cache_size=-%d", options.cache_size_kib)));
  db_options.create_if_missing = false;
  storage::SqliteDatabaseOptions read_options = db_options;
  read_options.sync_timing = {};  // readers write nothing
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> read_db,
                       SqliteDatabase::Open(db_path, read_options));
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

// ---- Reads: Load (kv_keys, then the events kv_keys does not reflect yet,
// replayed in commit order; leases) and ReadEvents (watch history from one read
// snapshot). ----

absl::StatusOr<PersistedKvState> SqliteKvBackend::Load() {
  absl::MutexLock lock(&write_mu_);
  DDP_ASSIGN_OR_RETURN(Meta meta, ReadMetaLocked());
  PersistedKvState state;
  state.revision = meta.revision;
  state.compacted_revision = meta.compacted_revision;
  state.next_lease_id = meta.next_lease_id;

  DDP_ASSIGN_OR_RETURN(int64_t max_event_revision,
                       write_db_->QueryInt64("SELECT IFNULL(MAX(revision), 0) FROM kv_events"));
  if (max_event_revision > state.revision) {
    return DataLoss(absl::StrFormat("an event has revision %d, after the store's revision %d",
                                    max_event_revision, state.revision));
  }

  DDP_ASSIGN_OR_RETURN(
      SqliteStatement keys,
      write_db_->Prepare("SELECT ns, key, value, create_revision, mod_revision, version, lease "
                         "FROM kv_keys"));
  while (true) {
    DDP_ASSIGN_OR_RETURN(bool row, keys.Step());
    if (!row) break;
    KeyValue kv;
    kv.ns = keys.ColumnBlob(0);
    kv.key = keys.ColumnBlob(1);
    kv.value = keys.ColumnBlob(2);
    kv.create_revision = keys.ColumnInt64(3);
    kv.mod_revision = keys.ColumnInt64(4);
    kv.version = keys.ColumnInt64(5);
    kv.lease = keys.ColumnInt64(6);
    state.keys.Upsert(std::move(kv));
  }
  DDP_RETURN_IF_ERROR(ReplayEventsLocked(meta, &state));
  absl::Status bad_key;
  state.keys.ForEach([&](const KeyValue& kv) {
    if (!bad_key.ok()) return;
    if (kv.mod_revision < 1 || kv.mod_revision > state.revision || kv.create_revision < 1 ||
        kv.create_revision > kv.mod_revision) {
      bad_key = DataLoss(absl::StrFormat(
          "key '%s' in namespace '%s' has create_revision %d "
          "and mod_revision %d; "
          "expected 1 <= create <= mod <= revision %d",
          absl::CHexEscape(kv.key.substr(0, 64)), absl::CHexEscape(kv.ns.substr(0, 64)),
          kv.create_revision, kv.mod_revision, state.revision));
    }
  });
  DDP_RETURN_IF_ERROR(bad_key);

  DDP_ASSIGN_OR_RETURN(SqliteStatement leases,
                       write_db_->Prepare("SELECT id, ttl_ms FROM kv_leases ORDER BY id"));
  while (true) {
    DDP_ASSIGN_OR_RETURN(bool row, leases.Step());
    if (!row) break;
    LeaseRecord lease;
    lease.id = leases.ColumnInt64(0);
    lease.ttl_ms = leases.ColumnInt64(1);
    if (lease.id < 1) return DataLoss(absl::StrFormat("a lease has id %d", lease.id));
    state.leases.push_back(lease);
  }
  meta_ = meta;
  return state;
}

absl::Status SqliteKvBackend::ReplayEventsLocked(const Meta& meta, PersistedKvState* state) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement events, write_db_->Prepare(kSelectEventsAfter));
  DDP_RETURN_IF_ERROR(events.BindInt64(1, meta.keys_revision));
  absl::flat_hash_map<DeferredKeyWrites::KeyRef, std::optional<KeyValue>> changes;
  while (true) {
    DDP_ASSIGN_OR_RETURN(bool row, events.Step());
    if (!row) break;
    const int64_t type = events.ColumnInt64(0);
    DeferredKeyWrites::KeyRef ref(events.ColumnBlob(1), events.ColumnBlob(2));
    if (type == static_cast<int64_t>(EventType::kDelete)) {
      state->keys.Erase(ref.first, ref.second);
      changes[std::move(ref)] = std::nullopt;
      continue;
    }
    if (type != static_cast<int64_t>(EventType::kPut)) {
      return DataLoss(absl::StrFormat("an event has unknown type %d", type));
    }
    KeyValue kv;
    kv.ns = ref.first;
    kv.key = ref.second;
    kv.value = events.ColumnBlob(3);
    kv.create_revision = events.ColumnInt64(4);
    kv.mod_revision = events.ColumnInt64(5);
    kv.version = events.ColumnInt64(6);
    kv.lease = events.ColumnInt64(7);
    state->keys.Upsert(kv);
    changes[std::move(ref)] = std::move(kv);
  }
  std::vector<KeyChange> pending;
  pending.reserve(changes.size());
  for (auto& [ref, kv] : changes) pending.emplace_back(ref, std::move(kv));
  deferred_.Reset(meta.keys_revision, meta.revision, std::move(pending));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Event>> SqliteKvBackend::ReadEvents(const std::string& ns,
                                                               const std::string& prefix,
                                                               Revision from_revision,
                                                               size_t max_events) {
  absl::MutexLock lock(&read_mu_);
  std::vector<Event> events;
  // One read transaction: the compacted revision and the events come from one
  // snapshot, so a concurrent Compact cannot leave holes in what is returned.
  DDP_ASSIGN_OR_RETURN(SqliteStatement * begin, read_db_->PrepareCached("BEGIN"));
  DDP_RETURN_IF_ERROR(begin->Run());
  absl::Status status = ReadEventsLocked(ns, prefix, from_revision, max_events, &events);
  absl::StatusOr<SqliteStatement*> end = read_db_->PrepareCached("COMMIT");
  absl::Status end_status = end.ok() ? (*end)->Run() : end.status();
  if (!end_status.ok() && !read_db_->InAutocommit()) {
    read_db_->Execute("ROLLBACK").IgnoreError();
  }
  if (!status.ok()) return status;
  if (!end_status.ok()) return end_status;
  return events;
}

absl::Status SqliteKvBackend::ReadEventsLocked(const std::string& ns, const std::string& prefix,
                                               Revision from_revision, size_t max_events,
                                               std::vector<Event>* out) {
  DDP_ASSIGN_OR_RETURN(int64_t compacted,
                       read_db_->QueryInt64("SELECT compacted_revision FROM kv_meta WHERE id = 1"));
  DDP_RETURN_IF_ERROR(CheckReadFrom(from_revision, compacted));
  if (max_events == 0) return absl::OkStatus();

  DDP_ASSIGN_OR_RETURN(SqliteStatement * select, read_db_->PrepareCached(kSelectEvents));
  SqliteStatement& s = *select;
  DDP_RETURN_IF_ERROR(s.BindBlob(1, ns));
  DDP_RETURN_IF_ERROR(s.BindInt64(2, from_revision));
  DDP_RETURN_IF_ERROR(s.BindBlob(3, prefix));
  std::string upper;
  if (PrefixUpperBound(prefix, &upper)) {
    DDP_RETURN_IF_ERROR(s.BindBlob(4, upper));
  } else {
    DDP_RETURN_IF_ERROR(s.BindNull(4));
  }
  const uint64_t limit = std::min<uint64_t>(max_events, std::numeric_limits<int64_t>::max());
  DDP_RETURN_IF_ERROR(s.BindInt64(5, static_cast<int64_t>(limit)));
  while (true) {
    absl::StatusOr<bool> row = s.Step();
    if (!row.ok()) {
      s.Reset();
      return row.status();
    }
    if (!*row) break;
    Event event;
    const int64_t type = s.ColumnInt64(0);
    if (type != static_cast<int64_t>(EventType::kPut) &&
        type != static_cast<int64_t>(EventType::kDelete)) {
      s.Reset();
      return DataLoss(absl::StrFormat("an event has unknown type %d", type));
    }
    event.type = static_cast<EventType>(type);
    event.kv.ns = ns;
    event.kv.key = s.ColumnBlob(1);
    event.kv.value = s.ColumnBlob(2);
    event.kv.create_revision = s.ColumnInt64(3);
    event.kv.mod_revision = s.ColumnInt64(4);
    event.kv.version = s.ColumnInt64(5);
    event.kv.lease = s.ColumnInt64(6);
    out->push_back(std::move(event));
  }
  s.Reset();
  return absl::OkStatus();
}

// ---- Background work and compaction: the maintenance thread (WAL checkpoints,
// sorting sealed key generations, deleting compacted events of an idle store),
// the writer's WAL restart, and Compact. ----

int SqliteKvBackend::OnWalCommit(void* backend, ::sqlite3*, const char*, int frames) {
  // Runs inside the writer's COMMIT, under write_mu_.
  static_cast<SqliteKvBackend*>(backend)->wal_frames_.store(frames, std::memory_order_relaxed);
  return SQLITE_OK;
}

void SqliteKvBackend::SortSealedKeys() {
  DeferredKeyWrites::ChangeMap unsorted;
  uint64_t ticket = 0;
  {
    absl::MutexLock lock(&write_mu_);
    if (!deferred_.NeedsSort()) return;
    unsorted = deferred_.TakeForSort(&ticket);
  }
  std::vector<KeyChange> sorted = DeferredKeyWrites::Sort(std::move(unsorted));
  absl::MutexLock lock(&write_mu_);
  deferred_.PutSorted(ticket, std::move(sorted));
}

void SqliteKvBackend::MaintenanceLoop() {
  pthread_setname_np(pthread_self(), "kv-maintain");
  // While the WAL is large, checkpoint often so the writer's own checkpoint
  // (which restarts the WAL) has only the last few frames left to copy.
  constexpr absl::Duration kChaseInterval = absl::Milliseconds(10);
  int64_t commits_seen = -1;
  while (true) {
    const bool chasing =
        wal_frames_.load(std::memory_order_relaxed) >= options_.wal_restart_frames / 2;
    {
      absl::MutexLock lock(&maintenance_mu_);
      const auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(maintenance_mu_) {
        return stopping_ || sort_wanted_;
      };
      maintenance_mu_.AwaitWithTimeout(
          absl::Condition(&wake), chasing ? std::min(kChaseInterval, options_.checkpoint_interval)
                                          : options_.checkpoint_interval);
      if (stopping_) return;
      sort_wanted_ = false;
    }
    SortSealedKeys();
    // Commits delete compacted events themselves; an idle store does it here.
    bool idle_backlog = false;
    {
      absl::MutexLock lock(&write_mu_);
      idle_backlog = compaction_backlog_ && commits_ == commits_seen;
      commits_seen = commits_;
    }
    if (idle_backlog) {
      const absl::Status status = DeleteAllCompacted();
      if (!status.ok()) {
        DDP_LOG_EVERY_N_SEC(WARNING, 10)
            << "deleting compacted events of " << path_ << " failed (retried later): " << status;
      }
    }
    // PASSIVE: copies what it can without waiting for the writer or readers.
    // A failure (e.g. busy) is harmless: the next round tries again.
    int wal_pages = 0, copied = 0;
    const int rc = sqlite3_wal_checkpoint_v2(checkpoint_db_->handle(), nullptr,
                                             SQLITE_CHECKPOINT_PASSIVE, &wal_pages, &copied);
    if (rc == SQLITE_OK) {
      backfilled_frames_.store(copied, std::memory_order_relaxed);
    } else if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) {
      DDP_LOG_EVERY_N_SEC(WARNING, 10)
          << "WAL checkpoint of " << path_
          << " failed: " << checkpoint_db_->ErrorStatus(rc, "checkpoint");
    }
  }
}

void SqliteKvBackend::MaybeRestartWalLocked() {
  // Frames the maintenance thread has not copied yet that the writer may copy
  // itself (about 2 MiB: a few milliseconds).
  constexpr int kMaxFramesLeft = 512;
  const int frames = wal_frames_.load(std::memory_order_relaxed);
  if (checkpoint_db_ == nullptr || frames < options_.wal_restart_frames) {
    return;
  }
  const int left = frames - backfilled_frames_.load(std::memory_order_relaxed);
  // Waits for the maintenance thread to get close, but not forever (it may be
  // starved of CPU): at 4x the size the writer copies whatever is left.
  if (left > kMaxFramesLeft && frames < 4 * options_.wal_restart_frames) return;
  wal_frames_.store(0, std::memory_order_relaxed);  // reported again next time
  // No other writer can append now (this thread is the writer), so the
  // checkpoint reaches the end of the WAL unless a reader still needs old
  // frames; then the next transaction starts writing at the WAL's beginning.
  int wal_pages = 0, copied = 0;
  const int rc = sqlite3_wal_checkpoint_v2(write_db_->handle(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                           &wal_pages, &copied);
  if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
    DDP_LOG_EVERY_N_SEC(WARNING, 10) << "WAL checkpoint by the writer of " << path_
                                     << " failed: " << write_db_->ErrorStatus(rc, "checkpoint");
  }
}

absl::Status SqliteKvBackend::Compact(Revision revision) {
  {
    absl::MutexLock lock(&write_mu_);
    DDP_RETURN_IF_ERROR(CheckCompactRevision(revision, meta_.revision));
    if (revision <= meta_.compacted_revision) return absl::OkStatus();
    // Record the new compacted revision first: from then on readers get
    // OUT_OF_RANGE for the old history, so deleting it in several transactions
    // is invisible.
    DDP_ASSIGN_OR_RETURN(SqliteTransaction transaction, SqliteTransaction::Begin(*write_db_));
    DDP_ASSIGN_OR_RETURN(
        SqliteStatement * update,
        write_db_->PrepareCached("UPDATE kv_meta SET compacted_revision = ?1 WHERE id = 1"));
    DDP_RETURN_IF_ERROR(update->BindInt64(1, revision));
    DDP_RETURN_IF_ERROR(update->Run());
    DDP_RETURN_IF_ERROR(transaction.Commit());
    meta_.compacted_revision = revision;
    compaction_backlog_ = true;  // commits or the maintenance thread delete
  }
  if (checkpoint_db_ == nullptr) return DeleteAllCompacted();
  return absl::OkStatus();
}

absl::Status SqliteKvBackend::DeleteAllCompacted() {
  bool done = false;
  while (!done) DDP_RETURN_IF_ERROR(DeleteCompactedChunk(&done));
  return absl::OkStatus();
}

absl::Status SqliteKvBackend::DeleteCompactedLocked(int64_t limit, bool* done) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement * remove, write_db_->PrepareCached(kDeleteCompactedChunk));
  // Events after keys_revision are still needed to rebuild kv_keys.
  DDP_RETURN_IF_ERROR(
      remove->BindInt64(1, std::min(meta_.compacted_revision, meta_.keys_revision)));
  DDP_RETURN_IF_ERROR(remove->BindInt64(2, limit));
  DDP_RETURN_IF_ERROR(remove->Run());
  *done = write_db_->ChangedRows() < limit;
  return absl::OkStatus();
}

absl::Status SqliteKvBackend::DeleteCompactedChunk(bool* done) {
  // The lock is taken per chunk so that commits interleave with a long
  // compaction.
  absl::MutexLock lock(&write_mu_);
  if (!compaction_backlog_) {
    *done = true;
    return absl::OkStatus();
  }
  DDP_ASSIGN_OR_RETURN(SqliteTransaction transaction, SqliteTransaction::Begin(*write_db_));
  DDP_RETURN_IF_ERROR(DeleteCompactedLocked(options_.compaction_chunk_events, done));
  DDP_RETURN_IF_ERROR(transaction.Commit());
  compaction_backlog_ = !*done;
  return absl::OkStatus();
}

}  // namespace ddp::kv
