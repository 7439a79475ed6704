#ifndef DDP_COORDINATOR_STORAGE_SQLITE_KV_BACKEND_H_
#define DDP_COORDINATOR_STORAGE_SQLITE_KV_BACKEND_H_

// The production KvBackend: one SQLite file in WAL mode with synchronous=FULL.
//
// Tables (prefixed kv_ because other components keep their tables in the same
// file):
//   kv_meta    one row: revision, compacted_revision, next_lease_id,
//              keys_revision
//   kv_keys    live keys, primary key (ns, key)
//   kv_events  history, append-only: revision (= the event's kv.mod_revision),
//              seq (order within the revision), type, ns, key, value,
//              create_revision, version, lease; indexed by (ns, revision, seq)
//              for ReadEvents
//   kv_leases  live leases: id, ttl_ms
// Namespaces, keys and values are stored as BLOBs: arbitrary bytes round-trip
// and prefixes compare bytewise.
//
// Commit is one BEGIN IMMEDIATE ... COMMIT transaction with cached prepared
// statements, so a whole group-committed batch costs one WAL fsync. It appends
// the batch's events (the durable record of every key change) and does NOT
// write the batch's keys to kv_keys: those writes are deferred and done later
// in key order, a slice inside each commit (sqlite_kv_backend_deferred_keys.h),
// so a commit dirties a few pages instead of one per key. kv_keys therefore
// holds every key as of kv_meta.keys_revision or newer; every event after
// keys_revision is kept, and Load replays those events over kv_keys. Closing
// the backend writes what is left, so a cleanly closed file has complete
// kv_keys; after kill -9 the replay covers the gap (at most
// DeferredKeyWritesOptions::seal_revisions plus one generation of events).
//
// Compact records the new compacted revision durably (one transaction); the
// old events are deleted afterwards, oldest first: each commit deletes up to
// twice as many as it appends (at least 256) inside its own transaction, so a
// busy store pays no extra fsync and no pause for it; when no commit came for
// a checkpoint interval, the maintenance thread deletes the rest in chunks of
// `compaction_chunk_events` rows, taking the writer mutex per chunk. Only
// events at or below both the compacted revision and keys_revision are
// deleted. A compaction interrupted by a crash is finished by the next Open. ReadEvents
// uses a second connection (its own mutex) and reads the compacted revision
// and the events in one snapshot, so it runs concurrently with Commit and
// never returns a history with holes.
//
// Checkpoints: SQLite's automatic WAL checkpoint would run inside a Commit every
// 1,000 pages and fsync the main file on the writer's path (the p99 tail of a
// busy store). The writer connection turns it off; the maintenance thread
// ("kv-maintain", its own connection) runs a PASSIVE checkpoint every
// `checkpoint_interval`, which copies committed WAL frames into the main file
// without blocking readers or the writer. Under constant load such a
// checkpoint never catches up with the writer, and SQLite restarts the WAL
// from its beginning only when it has, so the WAL would grow without bound.
// Once the WAL holds half of `wal_restart_frames` frames the maintenance
// thread checkpoints every few milliseconds, and once it holds them all and
// the maintenance thread is close behind, the writer itself runs a PASSIVE
// checkpoint right after a commit (copying the last few frames), after which
// the next commit starts the WAL over.
// Durability is unchanged: a commit is durable once its WAL frames are
// fsync'd.
//
// One SqliteKvBackend per file: two backends (or processes) writing the same
// file would each trust their own cached revision and deferred keys.
//
// Thread-safety: thread-safe. Commit, Compact, Load and compaction chunks
// serialize on one mutex; ReadEvents calls serialize on another and run
// concurrently with them.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "coordinator/kv/kv_backend.h"
#include "coordinator/storage/sqlite_database.h"
#include "coordinator/storage/sqlite_kv_backend_deferred_keys.h"

namespace ddp::kv {

struct SqliteKvBackendOptions {
  // How long a statement waits for a lock held by another connection.
  absl::Duration busy_timeout = absl::Seconds(5);
  // Events deleted per transaction by Compact (bounds the time the writer lock
  // is held and the size of the WAL).
  int compaction_chunk_events = 2000;
  // Page cache of the writer connection (SQLite's default is 2 MiB).
  int64_t cache_size_kib = 64 * 1024;
  // How often the maintenance thread checkpoints the WAL into the main file;
  // zero: no thread, SQLite's automatic checkpoint inside commits instead, and
  // Compact deletes old events before it returns.
  absl::Duration checkpoint_interval = absl::Milliseconds(250);
  // With the maintenance thread: the WAL size (in pages) at which the writer
  // checkpoints so that the WAL restarts; the WAL file is truncated back to
  // twice this size when it has grown beyond.
  int wal_restart_frames = 8192;
  // When kv_keys is written (see sqlite_kv_backend_deferred_keys.h).
  DeferredKeyWritesOptions deferred_keys;
  // With on_sync: every fsync of the writer and the checkpointer timed
  // (the commit's write-ahead log, the checkpoint's database file).
  storage::SqliteSyncTiming sync_timing;
  // The file's schema steps when other tables share it (SqliteStateStore):
  // SchemaMigrations() followed by theirs. Empty: SchemaMigrations().
  std::vector<storage::SqliteMigration> schema;
};

class SqliteKvBackend final : public KvBackend {
 public:
  // Opens (creating if needed) the database at `db_path`, brings the KV schema
  // up to date, checks the meta row and finishes an interrupted compaction.
  // Possible errors: FAILED_PRECONDITION (the file cannot be created or
  // written, or its schema is newer than this binary), DATA_LOSS (not a SQLite
  // database, corrupt, or an inconsistent meta row), UNAVAILABLE (I/O error,
  // locked), INVALID_ARGUMENT (bad options).
  static absl::StatusOr<std::unique_ptr<SqliteKvBackend>> Open(const std::string& db_path,
                                                               SqliteKvBackendOptions options = {});

  // The schema steps of the KV tables (for tools that build a shared file).
  static std::vector<storage::SqliteMigration> SchemaMigrations();

  // Stops the maintenance thread and writes the deferred keys to kv_keys.
  ~SqliteKvBackend() override;

  // Possible errors: DATA_LOSS (corrupt file, or stored values that contradict
  // each other: the message names them), UNAVAILABLE (I/O error).
  absl::StatusOr<PersistedKvState> Load() override;
  // Possible errors: INVALID_ARGUMENT (see CheckWriteBatch), UNAVAILABLE (I/O
  // error, disk full; nothing applied), DATA_LOSS (corruption detected).
  absl::Status Commit(const KvWriteBatch& batch) override;
  // The other tables of the file (options.schema) are written by `also`, on
  // the writer connection inside the commit's transaction: both become durable
  // together or not at all. `batch` null: a transaction of `also` alone.
  using OtherTables = std::function<absl::Status(storage::SqliteDatabase&)>;
  absl::Status CommitWith(const KvWriteBatch* batch, const OtherTables& also);
  // Runs `read` on the writer connection, under the writer mutex.
  absl::Status ReadOtherTables(const OtherTables& read);

  // Possible errors: OUT_OF_RANGE (from_revision <= compacted revision),
  // UNAVAILABLE.
  absl::StatusOr<std::vector<Event>> ReadEvents(const std::string& ns, const std::string& prefix,
                                                Revision from_revision, size_t max_events) override;
  // Possible errors: INVALID_ARGUMENT (revision > last committed), UNAVAILABLE.
  absl::Status Compact(Revision revision) override;

 private:
  struct Meta {
    Revision revision = 0;
    Revision compacted_revision = 0;
    LeaseId next_lease_id = 1;
    Revision keys_revision = 0;  // kv_keys is complete up to here
  };
  using KeyChange = DeferredKeyWrites::Change;

  SqliteKvBackend(SqliteKvBackendOptions options, std::unique_ptr<storage::SqliteDatabase> write_db,
                  std::unique_ptr<storage::SqliteDatabase> read_db,
                  std::unique_ptr<storage::SqliteDatabase> checkpoint_db);

  // Body of the "kv-maintain" thread: checkpoints, sorting sealed key
  // generations, and compaction chunks of an idle store.
  void MaintenanceLoop();
  // Sorts the sealed generation, if one waits, outside the writer mutex.
  void SortSealedKeys() ABSL_LOCKS_EXCLUDED(write_mu_);
  // SQLite's WAL hook: records the WAL size after each commit.
  static int OnWalCommit(void* backend, ::sqlite3* db, const char* name, int frames);

  absl::StatusOr<Meta> ReadMetaLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::Status ApplyBatchLocked(const KvWriteBatch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Writes deferred key states to kv_keys (inside the caller's transaction).
  absl::Status WriteKeysLocked(absl::Span<const KeyChange> changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::Status UpdateMetaLocked(const Meta& meta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Replays the events after meta.keys_revision over `state`, and hands the
  // changes they make to deferred_.
  absl::Status ReplayEventsLocked(const Meta& meta, PersistedKvState* state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Writes every deferred key to kv_keys in one transaction.
  absl::Status WriteAllDeferredLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // After a commit, once the WAL is big: checkpoint from the writer.
  void MaybeRestartWalLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Deletes up to `limit` events with revision <= min(compacted revision,
  // keys_revision), oldest first, inside the caller's transaction. Sets
  // `*done` when no such event is left.
  absl::Status DeleteCompactedLocked(int64_t limit, bool* done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Deletes one chunk in its own transaction.
  absl::Status DeleteCompactedChunk(bool* done) ABSL_LOCKS_EXCLUDED(write_mu_);
  absl::Status DeleteAllCompacted() ABSL_LOCKS_EXCLUDED(write_mu_);
  absl::Status ReadEventsLocked(const std::string& ns, const std::string& prefix,
                                Revision from_revision, size_t max_events, std::vector<Event>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_);
  absl::Status DataLoss(absl::string_view what) const;

  const SqliteKvBackendOptions options_;
  const std::string path_;

  absl::Mutex write_mu_;
  std::unique_ptr<storage::SqliteDatabase> write_db_ ABSL_GUARDED_BY(write_mu_);
  Meta meta_ ABSL_GUARDED_BY(write_mu_);
  DeferredKeyWrites deferred_ ABSL_GUARDED_BY(write_mu_);
  // Events at or below the compacted revision may still be stored.
  bool compaction_backlog_ ABSL_GUARDED_BY(write_mu_) = true;
  int64_t commits_ ABSL_GUARDED_BY(write_mu_) = 0;
  // WAL size after the last commit (written under write_mu_), and how much of
  // it the maintenance thread's last checkpoint had copied.
  std::atomic<int> wal_frames_{0};
  std::atomic<int> backfilled_frames_{0};

  absl::Mutex read_mu_;
  std::unique_ptr<storage::SqliteDatabase> read_db_ ABSL_GUARDED_BY(read_mu_);

  // Owned by the maintenance thread (null when checkpoint_interval is zero).
  std::unique_ptr<storage::SqliteDatabase> checkpoint_db_;
  absl::Mutex maintenance_mu_;
  bool stopping_ ABSL_GUARDED_BY(maintenance_mu_) = false;
  bool sort_wanted_ ABSL_GUARDED_BY(maintenance_mu_) = false;
  std::thread maintenance_thread_;
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_STORAGE_SQLITE_KV_BACKEND_H_
