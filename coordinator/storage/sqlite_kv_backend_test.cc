// SQLite-specific behaviour of SqliteKvBackend (the shared contract is covered
// by kv_backend_conformance_test): durability across processes, damaged files,
// bad paths.

#include "coordinator/storage/sqlite_kv_backend.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "coordinator/storage/sqlite_database.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

using ::testing::HasSubstr;

KvWriteBatch PutOne(Revision revision, const std::string& key, const std::string& value) {
  KvWriteBatch batch;
  batch.revision = revision;
  KeyValue kv{"ns", key, value, revision, revision, 1, 0};
  batch.upserts.push_back(kv);
  batch.events.push_back(Event{EventType::kPut, kv});
  return batch;
}

class SqliteKvBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* root = getenv("TEST_TMPDIR");
    std::string pattern = std::string(root != nullptr ? root : "/tmp") + "/sqlitekvXXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/kv.db";
  }

  std::unique_ptr<SqliteKvBackend> MustOpen() {
    absl::StatusOr<std::unique_ptr<SqliteKvBackend>> backend = SqliteKvBackend::Open(path_);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? std::move(backend).value() : nullptr;
  }

  // The first error of Open + Load (a damaged file may be caught by either).
  absl::Status OpenAndLoad() {
    DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteKvBackend> backend, SqliteKvBackend::Open(path_));
    return backend->Load().status();
  }

  // Creates a store at revision 3 (keys k1..k3), closes it, runs `sql` on the
  // raw file.
  void CreateThenTamper(const std::string& sql) {
    {
      std::unique_ptr<SqliteKvBackend> backend = MustOpen();
      for (Revision r = 1; r <= 3; ++r) {
        ASSERT_TRUE(backend->Commit(PutOne(r, "k" + std::to_string(r), "v")).ok());
      }
    }
    absl::StatusOr<std::unique_ptr<storage::SqliteDatabase>> db =
        storage::SqliteDatabase::Open(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)->Execute(sql).ok());
  }

  // Runs `child` in a forked process (no threads exist in it) and returns its
  // status.
  template <typename Child>
  int RunInChild(Child child, int* pipe_read_end = nullptr) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      child(fds[1]);
      _exit(3);  // the child must leave by itself
    }
    close(fds[1]);
    if (pipe_read_end != nullptr) {
      *pipe_read_end = fds[0];
    } else {
      close(fds[0]);
    }
    return pid;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(SqliteKvBackendTest, Open_AfterClose_StateSurvives) {
  {
    std::unique_ptr<SqliteKvBackend> backend = MustOpen();
    ASSERT_TRUE(backend->Commit(PutOne(1, "a", "1")).ok());
    ASSERT_TRUE(backend->Commit(PutOne(2, "b", "2")).ok());
    ASSERT_TRUE(backend->Compact(1).ok());
  }
  std::unique_ptr<SqliteKvBackend> backend = MustOpen();
  absl::StatusOr<PersistedKvState> state = backend->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->revision, 2);
  EXPECT_EQ(state->compacted_revision, 1);
  EXPECT_EQ(state->keys.size(), 2u);
  EXPECT_EQ(backend->Commit(PutOne(2, "c", "3")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend->Commit(PutOne(3, "c", "3")).ok());
}

TEST_F(SqliteKvBackendTest, Commit_ChildExitsWithoutClosing_DataSurvives) {
  const pid_t pid = RunInChild([this](int) {
    absl::StatusOr<std::unique_ptr<SqliteKvBackend>> backend = SqliteKvBackend::Open(path_);
    if (!backend.ok()) _exit(1);
    for (Revision r = 1; r <= 3; ++r) {
      if (!(*backend)->Commit(PutOne(r, "k" + std::to_string(r), "v")).ok()) _exit(2);
    }
    _exit(0);  // no destructors: the connection is never closed
  });
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  absl::StatusOr<PersistedKvState> state = MustOpen()->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->revision, 3);
  EXPECT_EQ(state->keys.size(), 3u);
}

TEST_F(SqliteKvBackendTest, Commit_ChildKilledAfterCommitReturned_DataSurvives) {
  int ready_fd = -1;
  const pid_t pid = RunInChild(
      [this](int ready) {
        absl::StatusOr<std::unique_ptr<SqliteKvBackend>> backend = SqliteKvBackend::Open(path_);
        if (!backend.ok()) _exit(1);
        if (!(*backend)->Commit(PutOne(1, "durable", std::string(1000, 'd'))).ok()) _exit(2);
        const char byte = 'c';  // tell the parent that Commit returned
        if (write(ready, &byte, 1) != 1) _exit(4);
        while (true) pause();  // wait for SIGKILL holding the file open
      },
      &ready_fd);
  char byte = 0;
  ASSERT_EQ(read(ready_fd, &byte, 1), 1) << "the child failed before committing";
  close(ready_fd);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  std::unique_ptr<SqliteKvBackend> backend = MustOpen();
  absl::StatusOr<PersistedKvState> state = backend->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->revision, 1);
  ASSERT_EQ(state->keys.size(), 1u);
  state->keys.ForEach([](const KeyValue& kv) { EXPECT_EQ(kv.value, std::string(1000, 'd')); });
  absl::StatusOr<std::vector<Event>> events = backend->ReadEvents("ns", "dur", 1, 10);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 1u);
}

TEST_F(SqliteKvBackendTest, Open_GarbageFile_DataLossWithReadableMessage) {
  std::ofstream(path_) << std::string(4096, 'G') << "this is not a database";
  absl::Status status = OpenAndLoad();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(path_));
  EXPECT_THAT(status.message(), HasSubstr("file is not a database"));
  EXPECT_THAT(status.message(), HasSubstr("restore it from a backup"));
}

TEST_F(SqliteKvBackendTest, Open_NonWritablePath_FailedPreconditionNamingPath) {
  std::ofstream(dir_ + "/not-a-dir") << "x";
  const std::string bad_path = dir_ + "/not-a-dir/kv.db";
  absl::StatusOr<std::unique_ptr<SqliteKvBackend>> backend = SqliteKvBackend::Open(bad_path);
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(backend.status().message(), HasSubstr(bad_path));
  EXPECT_THAT(backend.status().message(), HasSubstr("writable"));
}

TEST_F(SqliteKvBackendTest, Load_CompactedAfterRevision_DataLoss) {
  CreateThenTamper("UPDATE kv_meta SET compacted_revision = 99");
  absl::Status status = OpenAndLoad();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("compacted revision 99"));
}

TEST_F(SqliteKvBackendTest, Load_MetaRowMissing_DataLoss) {
  CreateThenTamper("DELETE FROM kv_meta");
  absl::Status status = OpenAndLoad();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("kv_meta row is missing"));
}

TEST_F(SqliteKvBackendTest, Load_KeyNewerThanRevision_DataLoss) {
  CreateThenTamper("UPDATE kv_keys SET mod_revision = 50 WHERE key = x'6B32'");
  absl::Status status = OpenAndLoad();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("key 'k2'"));
}

TEST_F(SqliteKvBackendTest, Load_EventNewerThanRevision_DataLoss) {
  CreateThenTamper("UPDATE kv_events SET revision = 8 WHERE revision = 3");
  EXPECT_EQ(OpenAndLoad().code(), absl::StatusCode::kDataLoss);
}

TEST_F(SqliteKvBackendTest, Open_SchemaFromNewerBinary_FailedPrecondition) {
  CreateThenTamper("PRAGMA user_version = 42");
  absl::Status status = OpenAndLoad();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("schema version 42"));
}

TEST_F(SqliteKvBackendTest, Open_CompactionInterruptedByCrash_FinishesIt) {
  // A crash between recording the compacted revision and deleting the events.
  CreateThenTamper("UPDATE kv_meta SET compacted_revision = 2");
  MustOpen();
  absl::StatusOr<std::unique_ptr<storage::SqliteDatabase>> db =
      storage::SqliteDatabase::Open(path_);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*(*db)->QueryInt64("SELECT COUNT(*) FROM kv_events WHERE revision <= 2"), 0);
  EXPECT_EQ(*(*db)->QueryInt64("SELECT COUNT(*) FROM kv_events"), 1);
}

TEST_F(SqliteKvBackendTest, Commit_FailsMidBatch_NothingAppliedAndRevisionUnchanged) {
  std::unique_ptr<SqliteKvBackend> backend = MustOpen();
  ASSERT_TRUE(backend->Commit(PutOne(1, "a", "1")).ok());
  {
    // Make the second event of the next batch fail inside the transaction.
    absl::StatusOr<std::unique_ptr<storage::SqliteDatabase>> db =
        storage::SqliteDatabase::Open(path_);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)
                    ->Execute("CREATE TRIGGER fail_poison BEFORE INSERT ON kv_events "
                              "WHEN NEW.key = x'706F69736F6E' "
                              "BEGIN SELECT RAISE(ABORT, 'poisoned key'); END")
                    .ok());
  }
  KvWriteBatch batch = PutOne(2, "b", "2");
  KeyValue poison{"ns", "poison", "x", 2, 2, 1, 0};
  batch.upserts.push_back(poison);
  batch.events.push_back(Event{EventType::kPut, poison});
  batch.lease_grants = {{5, 1000}};
  batch.next_lease_id = 6;
  absl::Status status = backend->Commit(batch);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("poisoned key"));

  absl::StatusOr<PersistedKvState> state = backend->Load();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->revision, 1);
  EXPECT_EQ(state->next_lease_id, 1);
  EXPECT_EQ(state->keys.size(), 1u);
  EXPECT_TRUE(state->leases.empty());
  EXPECT_EQ(backend->ReadEvents("ns", "", 1, 10)->size(), 1u);
  // The same revision can be committed once the cause is gone.
  EXPECT_TRUE(backend->Commit(PutOne(2, "b", "2")).ok());
}

// Options under which kv_keys is written only when 3 keys are pending, one
// key per commit, and Compact deletes events before it returns.
SqliteKvBackendOptions DeferringOptions() {
  SqliteKvBackendOptions options;
  options.checkpoint_interval = absl::ZeroDuration();
  options.deferred_keys.seal_keys = 3;
  options.deferred_keys.min_slice = 1;
  return options;
}

int64_t Count(const std::string& path, const std::string& sql) {
  absl::StatusOr<std::unique_ptr<storage::SqliteDatabase>> db = storage::SqliteDatabase::Open(path);
  EXPECT_TRUE(db.ok()) << db.status();
  if (!db.ok()) return -1;
  absl::StatusOr<int64_t> n = (*db)->QueryInt64(sql);
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *n : -1;
}

TEST_F(SqliteKvBackendTest, Commit_KeysWrittenLaterInSlices_MetaTracksThem) {
  auto backend = SqliteKvBackend::Open(path_, DeferringOptions());
  ASSERT_TRUE(backend.ok()) << backend.status();
  for (Revision r = 1; r <= 2; ++r) {
    ASSERT_TRUE((*backend)->Commit(PutOne(r, "k" + std::to_string(r), "v")).ok());
  }
  // Below the seal size: only the events are written.
  EXPECT_EQ(Count(path_, "SELECT COUNT(*) FROM kv_keys"), 0);
  EXPECT_EQ(Count(path_, "SELECT keys_revision FROM kv_meta"), 0);
  ASSERT_TRUE((*backend)->Commit(PutOne(3, "k3", "v")).ok());  // seals k1..k3
  ASSERT_TRUE((*backend)->Commit(PutOne(4, "k4", "v")).ok());  // writes k1, k2
  EXPECT_EQ(Count(path_, "SELECT COUNT(*) FROM kv_keys"), 2);
  EXPECT_EQ(Count(path_, "SELECT keys_revision FROM kv_meta"), 0);
  ASSERT_TRUE((*backend)->Commit(PutOne(5, "k5", "v")).ok());  // writes k3
  EXPECT_EQ(Count(path_, "SELECT COUNT(*) FROM kv_keys"), 3);
  EXPECT_EQ(Count(path_, "SELECT keys_revision FROM kv_meta"), 3);
  absl::StatusOr<PersistedKvState> state = (*backend)->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->keys.size(), 5u);  // k4 and k5 replayed from the events
  backend->reset();                   // closing writes k4 and k5
  EXPECT_EQ(Count(path_, "SELECT COUNT(*) FROM kv_keys"), 5);
  EXPECT_EQ(Count(path_, "SELECT keys_revision FROM kv_meta"), 5);
}

TEST_F(SqliteKvBackendTest, Compact_KeysNotWrittenYet_EventsKeptSoCrashLosesNothing) {
  const pid_t pid = RunInChild([this](int) {
    SqliteKvBackendOptions options = DeferringOptions();
    options.deferred_keys.seal_keys = 1000;  // kv_keys stays empty
    absl::StatusOr<std::unique_ptr<SqliteKvBackend>> backend =
        SqliteKvBackend::Open(path_, options);
    if (!backend.ok()) _exit(1);
    for (Revision r = 1; r <= 4; ++r) {
      if (!(*backend)->Commit(PutOne(r, "k" + std::to_string(r), "v")).ok()) _exit(2);
    }
    KvWriteBatch remove;
    remove.revision = 5;
    remove.deletes.push_back({"ns", "k2"});
    KeyValue gone{"ns", "k2", "", 0, 5, 0, 0};
    remove.events.push_back(Event{EventType::kDelete, gone});
    if (!(*backend)->Commit(remove).ok()) _exit(3);
    if (!(*backend)->Compact(5).ok()) _exit(4);
    _exit(0);  // no destructor: kv_keys is never written
  });
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(Count(path_, "SELECT COUNT(*) FROM kv_keys"), 0);
  EXPECT_EQ(Count(path_, "SELECT COUNT(*) FROM kv_events"), 5);

  std::unique_ptr<SqliteKvBackend> backend = MustOpen();
  absl::StatusOr<PersistedKvState> state = backend->Load();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->revision, 5);
  EXPECT_EQ(state->compacted_revision, 5);
  std::vector<std::string> keys;
  state->keys.ForEach([&](const KeyValue& kv) { keys.push_back(kv.key); });
  std::sort(keys.begin(), keys.end());
  EXPECT_THAT(keys, ::testing::ElementsAre("k1", "k3", "k4"));
  // The history is gone for readers even though its rows were kept.
  EXPECT_EQ(backend->ReadEvents("ns", "", 5, 10).status().code(), absl::StatusCode::kOutOfRange);
  backend.reset();  // writes kv_keys: now the compacted events can go
  backend = MustOpen();
  ASSERT_TRUE(backend->Compact(5).ok());
  backend.reset();
  EXPECT_EQ(Count(path_, "SELECT COUNT(*) FROM kv_keys"), 3);
  EXPECT_EQ(Count(path_, "SELECT COUNT(*) FROM kv_events"), 0);
}

TEST_F(SqliteKvBackendTest, Commit_ManyUnderLoad_WalRestartsInsteadOfGrowing) {
  SqliteKvBackendOptions options;
  options.checkpoint_interval = absl::Hours(1);  // the thread never runs
  options.wal_restart_frames = 16;
  auto backend = SqliteKvBackend::Open(path_, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  for (Revision r = 1; r <= 500; ++r) {
    ASSERT_TRUE(
        (*backend)->Commit(PutOne(r, "key-" + std::to_string(r), std::string(3000, 'v'))).ok());
  }
  // 500 commits of at least one 4 KiB page each: 2 MB without restarts.
  struct stat wal;
  ASSERT_EQ(stat((path_ + "-wal").c_str(), &wal), 0);
  EXPECT_LT(wal.st_size, 512 * 1024);
}

TEST_F(SqliteKvBackendTest, Compact_BusyStore_NextCommitDeletesOldEvents) {
  SqliteKvBackendOptions options;
  options.checkpoint_interval = absl::Hours(1);  // the thread never runs
  auto backend = SqliteKvBackend::Open(path_, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  for (Revision r = 1; r <= 10; ++r) {
    ASSERT_TRUE((*backend)->Commit(PutOne(r, "k", std::to_string(r))).ok());
  }
  backend->reset();  // kv_keys complete up to 10
  backend = SqliteKvBackend::Open(path_, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->Compact(8).ok());
  // Recorded, not yet deleted: that is the next commit's job.
  EXPECT_EQ(Count(path_, "SELECT COUNT(*) FROM kv_events"), 10);
  ASSERT_TRUE((*backend)->Commit(PutOne(11, "k", "11")).ok());
  EXPECT_EQ(Count(path_, "SELECT COUNT(*) FROM kv_events WHERE revision <= 8"), 0);
  EXPECT_EQ(Count(path_, "SELECT COUNT(*) FROM kv_events"), 3);
}

TEST_F(SqliteKvBackendTest, Compact_IdleStore_MaintenanceThreadDeletes) {
  SqliteKvBackendOptions options;
  options.checkpoint_interval = absl::Milliseconds(5);
  options.compaction_chunk_events = 2;  // several chunks
  {
    auto backend = SqliteKvBackend::Open(path_, options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    for (Revision r = 1; r <= 10; ++r) {
      ASSERT_TRUE((*backend)->Commit(PutOne(r, "k", std::to_string(r))).ok());
    }
  }
  auto backend = SqliteKvBackend::Open(path_, options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->Compact(9).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  int64_t left = -1;
  while ((left = Count(path_, "SELECT COUNT(*) FROM kv_events")) != 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // polling another connection
  }
  EXPECT_EQ(left, 1);
}

}  // namespace
}  // namespace ddp::kv
