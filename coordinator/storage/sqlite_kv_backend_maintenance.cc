// SqliteKvBackend's background work and compaction: the maintenance thread
// (WAL checkpoints, sorting sealed key generations, deleting compacted events
// of an idle store), the writer's WAL restart, and Compact. The schema, Open
// and Commit are in sqlite_kv_backend.cc; Load and ReadEvents in
// sqlite_kv_backend_read.cc.

#include <pthread.h>
#include <sqlite3.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/storage/sqlite_kv_backend.h"
#include "coordinator/storage/write_batch_checks.h"

namespace ddp::kv {
namespace {

using storage::SqliteStatement;
using storage::SqliteTransaction;

// Events are inserted in revision order, so the rows with the smallest ids are
// the oldest: look at the first chunk only and delete the compacted ones among
// them.
constexpr char kDeleteCompactedChunk[] =
    "DELETE FROM kv_events WHERE id IN (SELECT id FROM kv_events ORDER BY id "
    "LIMIT ?2) "
    "AND revision <= ?1";
}  // namespace

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

#undef KV_RETURN_IF_ERROR
