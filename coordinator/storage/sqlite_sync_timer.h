#ifndef DDP_COORDINATOR_STORAGE_SQLITE_SYNC_TIMER_H_
#define DDP_COORDINATOR_STORAGE_SQLITE_SYNC_TIMER_H_

// Times every fsync SQLite makes, apart from the transaction around it: a
// SQLite VFS that forwards every call to the default one ("unix") and, around
// each file's xSync, reads a Clock and reports how long the sync took and of
// which file (the write-ahead log at COMMIT, the database at a checkpoint).
// The coordinator's commit histogram holds the whole transaction; this one
// tells a slow disk from slow work (ddp_store_fsync_seconds).
//
// Each timer registers its own VFS under a unique name (vfs_name(), never the
// default), so connections opened with that name report to it and no other
// connection is touched. A SqliteDatabase opened with
// SqliteDatabaseOptions::sync_timing owns one (sqlite_database.h).
//
// Thread-safety: on_sync may be called from any thread that syncs a file of
// a connection opened with the VFS, concurrently: it must be thread-safe.
// Register and the destructor from any one thread; the timer must outlive
// every connection opened with its VFS.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ddp::storage {

struct SqliteSyncTimerVfs;

// Which file a sync made durable.
enum class SyncedFile {
  kDatabase,  // the main database file (checkpoints)
  kWal,       // the write-ahead log (every COMMIT in WAL mode)
  kOther,     // a rollback journal, a temporary file
};

// "database", "wal", "other": the metric label.
const char* SyncedFileName(SyncedFile file);

struct SqliteSyncTiming {
  // Called after each sync with its duration; null: no timing (no VFS).
  std::function<void(SyncedFile file, absl::Duration took)> on_sync;
  // Read before and after each sync; null: MonotonicClock.
  const Clock* clock = nullptr;
};

class SqliteSyncTimer {
 public:
  // Registers the VFS. Possible errors: INVALID_ARGUMENT (no on_sync),
  // INTERNAL (SQLite has no default VFS, or refused the registration).
  static absl::StatusOr<std::unique_ptr<SqliteSyncTimer>> Register(SqliteSyncTiming timing);
  ~SqliteSyncTimer();  // unregisters the VFS
  SqliteSyncTimer(const SqliteSyncTimer&) = delete;
  SqliteSyncTimer& operator=(const SqliteSyncTimer&) = delete;

  // The name to give sqlite3_open_v2.
  const std::string& vfs_name() const;

 private:
  explicit SqliteSyncTimer(std::unique_ptr<SqliteSyncTimerVfs> vfs);

  // The registered VFS: SQLite's record, the default VFS it forwards to, and
  // where each sync is reported (sqlite_sync_timer.cc).
  std::unique_ptr<SqliteSyncTimerVfs> vfs_;
};

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_SQLITE_SYNC_TIMER_H_
