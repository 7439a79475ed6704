// SqliteSyncTimer through a real SqliteDatabase on a file: every sync of a
// commit and of a checkpoint is reported with its file and its duration as
// the clock saw it; a connection without timing reports nothing.

#include "coordinator/storage/sqlite_sync_timer.h"

#include <stdlib.h>

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/storage/sqlite_database.h"
#include "gtest/gtest.h"

namespace ddp::storage {
namespace {

// Each reading of the clock is 3 ms after the one before: a sync "takes" 3 ms.
class SteppingClock final : public Clock {
 public:
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    now_ += absl::Milliseconds(3);
    return now_;
  }

 private:
  mutable absl::Mutex mu_;
  mutable absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch();
};

struct Syncs {
  absl::Mutex mu;
  std::map<SyncedFile, int> count ABSL_GUARDED_BY(mu);
  absl::Duration total ABSL_GUARDED_BY(mu);
};

std::string TempPath(const std::string& name) {
  std::string dir = std::string(getenv("TEST_TMPDIR")) + "/syncXXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir + "/" + name;
}

SqliteDatabaseOptions TimedOptions(Syncs& syncs, const Clock& clock) {
  SqliteDatabaseOptions options;
  options.sync_timing.clock = &clock;
  options.sync_timing.on_sync = [&syncs](SyncedFile file, absl::Duration took) {
    absl::MutexLock lock(&syncs.mu);
    ++syncs.count[file];
    syncs.total += took;
  };
  return options;
}

TEST(SqliteSyncTimer, Commit_WalSyncedAndTimed) {
  Syncs syncs;
  SteppingClock clock;
  auto db = SqliteDatabase::Open(TempPath("commit.db"), TimedOptions(syncs, clock));
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Execute("CREATE TABLE t (v INTEGER)").ok());
  int wal_before, database_before;
  {
    absl::MutexLock lock(&syncs.mu);
    wal_before = syncs.count[SyncedFile::kWal];
    database_before = syncs.count[SyncedFile::kDatabase];
  }
  ASSERT_TRUE((*db)->Execute("INSERT INTO t VALUES (1)").ok());
  absl::MutexLock lock(&syncs.mu);
  // synchronous=FULL in WAL mode: the commit syncs the log, not the database.
  EXPECT_EQ(syncs.count[SyncedFile::kWal], wal_before + 1);
  EXPECT_EQ(syncs.count[SyncedFile::kDatabase], database_before);
  int all = 0;
  for (const auto& [file, n] : syncs.count) all += n;
  EXPECT_EQ(syncs.total, absl::Milliseconds(3) * all);
}

TEST(SqliteSyncTimer, Checkpoint_DatabaseFileSynced) {
  Syncs syncs;
  SteppingClock clock;
  auto db = SqliteDatabase::Open(TempPath("checkpoint.db"), TimedOptions(syncs, clock));
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Execute("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1)").ok());
  ASSERT_TRUE((*db)->Execute("PRAGMA wal_checkpoint(TRUNCATE)").ok());
  absl::MutexLock lock(&syncs.mu);
  EXPECT_GE(syncs.count[SyncedFile::kDatabase], 1);
}

TEST(SqliteSyncTimer, TwoTimers_EachSeesItsOwnConnection) {
  Syncs first_syncs, second_syncs;
  SteppingClock clock;
  auto first = SqliteDatabase::Open(TempPath("first.db"), TimedOptions(first_syncs, clock));
  auto second = SqliteDatabase::Open(TempPath("second.db"), TimedOptions(second_syncs, clock));
  auto untimed = SqliteDatabase::Open(TempPath("untimed.db"));
  ASSERT_TRUE(first.ok() && second.ok() && untimed.ok());
  ASSERT_TRUE((*untimed)->Execute("CREATE TABLE t (v INTEGER)").ok());
  ASSERT_TRUE((*first)->Execute("CREATE TABLE t (v INTEGER)").ok());
  absl::MutexLock lock_first(&first_syncs.mu);
  absl::MutexLock lock_second(&second_syncs.mu);
  EXPECT_GE(first_syncs.count[SyncedFile::kWal], 1);
  EXPECT_EQ(second_syncs.count[SyncedFile::kWal], 0);
}

TEST(SqliteSyncTimer, Register_NoCallback_InvalidArgument) {
  auto timer = SqliteSyncTimer::Register({});
  ASSERT_FALSE(timer.ok());
  EXPECT_EQ(timer.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SqliteSyncTimer, Names_AreTheMetricLabels) {
  EXPECT_STREQ(SyncedFileName(SyncedFile::kWal), "wal");
  EXPECT_STREQ(SyncedFileName(SyncedFile::kDatabase), "database");
  EXPECT_STREQ(SyncedFileName(SyncedFile::kOther), "other");
}

}  // namespace
}  // namespace ddp::storage
