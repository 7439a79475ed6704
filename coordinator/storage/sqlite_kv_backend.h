#ifndef DDP_COORDINATOR_STORAGE_SQLITE_KV_BACKEND_H_
#define DDP_COORDINATOR_STORAGE_SQLITE_KV_BACKEND_H_

// The production KvBackend: one SQLite file in WAL mode with synchronous=FULL.
//
// Tables (prefixed kv_ because other components keep their tables in the same
// file):
//   kv_meta    one row: revision, compacted_revision, next_lease_id
//   kv_keys    live keys, primary key (ns, key)
//   kv_events  history: revision (= the event's kv.mod_revision), seq (order
//   within the
//              revision), type, ns, key, value, create_revision, version,
//              lease; indexed by (ns, revision, seq) for ReadEvents
//   kv_leases  live leases: id, ttl_ms
// Namespaces, keys and values are stored as BLOBs: arbitrary bytes round-trip
// and prefixes compare bytewise.
//
// Commit is one BEGIN IMMEDIATE ... COMMIT transaction with cached prepared
// statements, so a whole group-committed batch costs one WAL fsync. Compact
// first records the new compacted revision (one transaction), then deletes old
// events in chunks of `compaction_chunk_events` rows, each its own transaction,
// releasing the writer lock between chunks so commits are not held up; a
// compaction interrupted by a crash is finished by the next Open. ReadEvents
// uses a second connection (its own mutex) and reads the compacted revision and
// the events in one snapshot, so it runs concurrently with Commit and never
// returns a history with holes.
//
// Checkpoints: SQLite's automatic WAL checkpoint would run inside a Commit every
// 1,000 pages and fsync the main file on the writer's path (the p99 tail of a
// busy store). The writer connection turns it off; a background thread
// ("kv-checkpoint", its own connection) runs a PASSIVE checkpoint every
// `checkpoint_interval`, which copies committed WAL frames into the main file
// without blocking readers or the writer. Durability is unchanged: a commit is
// durable once its WAL frames are fsync'd.
//
// One SqliteKvBackend per file: two backends (or processes) writing the same
// file would each trust their own cached revision.
//
// Thread-safety: thread-safe. Commit, Compact and Load serialize on one mutex;
// ReadEvents calls serialize on another and run concurrently with them.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/storage/kv_backend.h"
#include "coordinator/storage/sqlite_database.h"

namespace ddp::kv {

struct SqliteKvBackendOptions {
  // How long a statement waits for a lock held by another connection.
  absl::Duration busy_timeout = absl::Seconds(5);
  // Events deleted per transaction by Compact (bounds the time the writer lock
  // is held and the size of the WAL).
  int compaction_chunk_events = 10000;
  // Page cache of the writer connection (SQLite's default is 2 MiB).
  int64_t cache_size_kib = 64 * 1024;
  // How often the background thread checkpoints the WAL into the main file;
  // zero: no thread, SQLite's automatic checkpoint inside commits instead.
  absl::Duration checkpoint_interval = absl::Milliseconds(250);
};

class SqliteKvBackend final : public KvBackend {
 public:
  // Opens (creating if needed) the database at `db_path`, brings the KV schema
  // up to date, checks the meta row and finishes an interrupted compaction.
  // Possible errors: FAILED_PRECONDITION (the file cannot be created or
  // written, or its schema is newer than this binary), DATA_LOSS (not a SQLite
  // database, corrupt, or an inconsistent meta row), UNAVAILABLE (I/O error,
  // locked), INVALID_ARGUMENT (bad options).
  static absl::StatusOr<std::unique_ptr<SqliteKvBackend>> Open(
      const std::string& db_path, SqliteKvBackendOptions options = {});

  // The schema steps of the KV tables (for tools that build a shared file).
  static std::vector<storage::SqliteMigration> SchemaMigrations();

  // Stops the checkpoint thread.
  ~SqliteKvBackend() override;

  // Possible errors: DATA_LOSS (corrupt file, or stored values that contradict
  // each other: the message names them), UNAVAILABLE (I/O error).
  absl::StatusOr<PersistedKvState> Load() override;
  // Possible errors: INVALID_ARGUMENT (see CheckWriteBatch), UNAVAILABLE (I/O
  // error, disk full; nothing applied), DATA_LOSS (corruption detected).
  absl::Status Commit(const KvWriteBatch& batch) override;
  // Possible errors: OUT_OF_RANGE (from_revision <= compacted revision),
  // UNAVAILABLE.
  absl::StatusOr<std::vector<Event>> ReadEvents(const std::string& ns,
                                                const std::string& prefix,
                                                Revision from_revision,
                                                size_t max_events) override;
  // Possible errors: INVALID_ARGUMENT (revision > last committed), UNAVAILABLE.
  absl::Status Compact(Revision revision) override;

 private:
  struct Meta {
    Revision revision = 0;
    Revision compacted_revision = 0;
    LeaseId next_lease_id = 1;
  };

  SqliteKvBackend(SqliteKvBackendOptions options,
                  std::unique_ptr<storage::SqliteDatabase> write_db,
                  std::unique_ptr<storage::SqliteDatabase> read_db,
                  std::unique_ptr<storage::SqliteDatabase> checkpoint_db);

  // Body of the "kv-checkpoint" thread.
  void CheckpointLoop();

  absl::StatusOr<Meta> ReadMetaLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::Status ApplyBatchLocked(const KvWriteBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Deletes up to one chunk of events with revision <= compacted revision. Sets
  // `*done` when no such event is left.
  absl::Status DeleteCompactedChunk(bool* done) ABSL_LOCKS_EXCLUDED(write_mu_);
  absl::Status DeleteAllCompacted() ABSL_LOCKS_EXCLUDED(write_mu_);
  absl::Status ReadEventsLocked(const std::string& ns,
                                const std::string& prefix,
                                Revision from_revision, size_t max_events,
                                std::vector<Event>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu_);
  absl::Status DataLoss(absl::string_view what) const;

  const SqliteKvBackendOptions options_;
  const std::string path_;

  absl::Mutex write_mu_;
  std::unique_ptr<storage::SqliteDatabase> write_db_ ABSL_GUARDED_BY(write_mu_);
  Meta meta_ ABSL_GUARDED_BY(write_mu_);

  absl::Mutex read_mu_;
  std::unique_ptr<storage::SqliteDatabase> read_db_ ABSL_GUARDED_BY(read_mu_);

  // Owned by the checkpoint thread (null when checkpoint_interval is zero).
  std::unique_ptr<storage::SqliteDatabase> checkpoint_db_;
  absl::Mutex checkpoint_mu_;
  bool stopping_ ABSL_GUARDED_BY(checkpoint_mu_) = false;
  std::thread checkpoint_thread_;
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_STORAGE_SQLITE_KV_BACKEND_H_
