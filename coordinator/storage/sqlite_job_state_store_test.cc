// SQLite-specific behaviour of SqliteJobStateStore (the shared contract is
// covered by job_state_store_conformance_test): durability across a killed
// process, damaged files, O(1) writes per join, atomicity of a failing batch.

#include "coordinator/storage/sqlite_job_state_store.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "coordinator/storage/sqlite_database.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using ::testing::HasSubstr;

NodeRecord Node(const std::string& node_id, int group_rank) {
  NodeRecord n;
  n.node_id = node_id;
  n.incarnation = 0x8000000000000000ull + group_rank + 1;
  n.nproc = 8;
  n.address = node_id + ":29400";
  n.group_rank = group_rank;
  n.global_rank_offset = int64_t{group_rank} * 8;
  n.join_seq = static_cast<uint64_t>(group_rank + 1);
  return n;
}

JobChanges CreateJob(const std::string& job_id) {
  JobChanges c;
  c.job_id = job_id;
  c.job = JobRecord{};
  c.job->job_id = job_id;
  c.job->settings.max_nodes = 4096;
  return c;
}

// One join: the counters and one node record, as the core batches it.
JobChanges Join(const std::string& job_id, int n) {
  JobChanges c;
  c.job_id = job_id;
  c.counters = JobCounters{n + 1, static_cast<uint64_t>(n + 2)};
  c.upserted_nodes = {Node("node-" + std::to_string(n), n)};
  return c;
}

class SqliteJobStateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* root = getenv("TEST_TMPDIR");
    std::string pattern = std::string(root != nullptr ? root : "/tmp") + "/sqlitejobsXXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    path_ = pattern + "/jobs.db";
  }

  std::unique_ptr<SqliteJobStateStore> MustOpen() {
    absl::StatusOr<std::unique_ptr<SqliteJobStateStore>> store = SqliteJobStateStore::Open(path_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // The first error of Open + LoadAll (a damaged file may fail either).
  absl::Status OpenAndLoad() {
    DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteJobStateStore> store,
                         SqliteJobStateStore::Open(path_));
    return store->LoadAll().status();
  }

  // Runs `sql` on the raw file through a second connection.
  void Execute(const std::string& sql) {
    absl::StatusOr<std::unique_ptr<storage::SqliteDatabase>> db =
        storage::SqliteDatabase::Open(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    absl::Status status = (*db)->Execute(sql);
    ASSERT_TRUE(status.ok()) << status;
  }

  int64_t QueryInt64(const std::string& sql) {
    absl::StatusOr<std::unique_ptr<storage::SqliteDatabase>> db =
        storage::SqliteDatabase::Open(path_);
    EXPECT_TRUE(db.ok()) << db.status();
    if (!db.ok()) return -1;
    absl::StatusOr<int64_t> value = (*db)->QueryInt64(sql);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : -1;
  }

  // A job "j" with nodes node-0, node-1, closed; then `sql` on the raw file.
  void CreateThenTamper(const std::string& sql) {
    {
      std::unique_ptr<SqliteJobStateStore> store = MustOpen();
      ASSERT_TRUE(store->Apply(CreateJob("j")).ok());
      ASSERT_TRUE(store->Apply(Join("j", 0)).ok());
      ASSERT_TRUE(store->Apply(Join("j", 1)).ok());
    }
    Execute(sql);
  }

  std::string path_;
};

TEST_F(SqliteJobStateStoreTest, Apply_ChildKilledRightAfterApply_DataSurvives) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    absl::StatusOr<std::unique_ptr<SqliteJobStateStore>> store = SqliteJobStateStore::Open(path_);
    if (!store.ok()) _exit(1);
    if (!(*store)->Apply(CreateJob("j")).ok()) _exit(2);
    for (int n = 0; n < 3; ++n) {
      if (!(*store)->Apply(Join("j", n)).ok()) _exit(2);
    }
    const char byte = 'a';  // tell the parent that the last Apply returned
    if (write(fds[1], &byte, 1) != 1) _exit(4);
    while (true) pause();  // wait for SIGKILL holding the file open
  }
  close(fds[1]);
  char byte = 0;
  ASSERT_EQ(read(fds[0], &byte, 1), 1) << "the child failed before applying";
  close(fds[0]);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;

  absl::StatusOr<std::vector<JobSnapshot>> all = MustOpen()->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].job.last_event_index, 3);
  EXPECT_EQ((*all)[0].job.next_join_seq, 4u);
  ASSERT_EQ((*all)[0].nodes.size(), 3u);
  EXPECT_EQ((*all)[0].nodes[2].node_id, "node-2");
  EXPECT_EQ((*all)[0].nodes[2].incarnation, 0x8000000000000003ull);
}

TEST_F(SqliteJobStateStoreTest, Open_GarbageFile_DataLossNamingPath) {
  std::ofstream(path_) << std::string(4096, 'G') << "this is not a database";
  absl::Status status = OpenAndLoad();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr(path_));
  EXPECT_THAT(status.message(), HasSubstr("file is not a database"));
}

TEST_F(SqliteJobStateStoreTest, Open_SchemaFromNewerBinary_FailedPrecondition) {
  CreateThenTamper("PRAGMA user_version = 42");
  EXPECT_EQ(OpenAndLoad().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SqliteJobStateStoreTest, LoadAll_NodesOfMissingJob_DataLoss) {
  CreateThenTamper("UPDATE job_nodes SET job_id = x'67686F7374'");  // 'ghost'
  absl::Status status = OpenAndLoad();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("job_nodes has rows of job 'ghost'"));
  EXPECT_THAT(status.message(), HasSubstr(path_));
  EXPECT_THAT(status.message(), HasSubstr("restore it from a backup"));
}

TEST_F(SqliteJobStateStoreTest, LoadAll_FailuresOfMissingJob_DataLoss) {
  CreateThenTamper(
      "INSERT INTO job_failures VALUES (x'6E6F6E65', 0, x'', 1, 0, 0, 1, 0, "
      "x'', 0, 0, 0); INSERT INTO job_excluded_nodes VALUES (x'6E6F6E65', x'61')");
  absl::Status status = OpenAndLoad();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("job_failures has rows of job"));
}

TEST_F(SqliteJobStateStoreTest, LoadAll_UnknownStateNumber_DataLoss) {
  CreateThenTamper("UPDATE jobs SET state = 42");
  absl::Status status = OpenAndLoad();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("job 'j' has unknown state number 42"));
}

TEST_F(SqliteJobStateStoreTest, LoadAll_NprocBeyondInt_DataLoss) {
  CreateThenTamper("UPDATE job_nodes SET nproc = 1099511627776");
  absl::Status status = OpenAndLoad();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("has nproc 1099511627776"));
}

// A jobs.db written by a coordinator of schema version 1 (before failures
// carried hang and pid, and jobs their creation time) opens, migrates in place
// and keeps every row.
TEST_F(SqliteJobStateStoreTest, Open_Version1File_MigratedRowsKept) {
  {
    absl::StatusOr<std::unique_ptr<storage::SqliteDatabase>> db =
        storage::SqliteDatabase::Open(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)->Migrate({SqliteJobStateStore::SchemaMigrations()[0]}).ok());
    // The rows as version 1 wrote them: its own column lists.
    ASSERT_TRUE((*db)
                    ->Execute(R"sql(
INSERT INTO jobs (job_id, min_nodes, max_nodes, nproc_per_node, max_restarts,
  join_timeout_ms, last_call_timeout_ms, heartbeat_interval_ms,
  heartbeat_timeout_ms, shutdown_timeout_ms, state, generation, restart_count,
  has_root_cause, root_cause_node_id, root_cause_generation,
  root_cause_local_rank, root_cause_global_rank, root_cause_exit_code,
  root_cause_signal, root_cause_message, root_cause_time_ns, finish_message,
  master_addr, master_port, nccl_unique_id, world_size, last_event_index,
  next_join_seq)
VALUES (X'6F6C64', 2, 2, 2, 0, 600000, 30000, 500, 3000, 30000, 5, 3, 0,
  1, X'6E6F64652D61', 3, 1, 1, 7, 0, X'626F6F6D', 1700000000000000000, X'',
  X'', 0, X'', 4, 12, 3);
INSERT INTO job_failures (job_id, seq, node_id, generation, local_rank,
  global_rank, exit_code, signal, message, time_ns)
VALUES (X'6F6C64', 0, X'6E6F64652D61', 3, 1, 1, 7, 0, X'626F6F6D',
  1700000000000000000);
)sql")
                    .ok());
    ASSERT_EQ(*(*db)->UserVersion(), 1);
  }
  std::unique_ptr<SqliteJobStateStore> store = MustOpen();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<JobSnapshot>> all = store->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  const JobRecord& job = (*all)[0].job;
  EXPECT_EQ(job.job_id, "old");
  EXPECT_EQ(job.state, JobState::kFailed);
  ASSERT_TRUE(job.root_cause.has_value());
  EXPECT_EQ(job.root_cause->node_id, "node-a");
  EXPECT_EQ(job.root_cause->exit_code, 7);
  EXPECT_EQ(job.root_cause->message, "boom");
  EXPECT_FALSE(job.root_cause->hang);
  EXPECT_EQ(job.root_cause->pid, 0);
  ASSERT_EQ(job.failures.size(), 1u);
  EXPECT_EQ(job.failures[0].time, absl::FromUnixSeconds(1700000000));
  EXPECT_FALSE(job.failures[0].hang);
  EXPECT_EQ(job.failures[0].pid, 0);
  EXPECT_EQ(job.created, absl::Time());  // unknown before version 3
  EXPECT_EQ(job.run, 1);                 // before version 4: the first run
  EXPECT_EQ(job.finished, absl::Time());
  EXPECT_TRUE((*all)[0].past_runs.empty());
  EXPECT_EQ(job.token_hash, "");  // before version 5: no token
  EXPECT_EQ(QueryInt64("PRAGMA user_version"), 5);
  // The migrated file takes the new fields.
  JobRecord updated = job;
  updated.root_cause->hang = true;
  updated.root_cause->pid = 99;
  updated.created = absl::FromUnixSeconds(1700000000);
  updated.finished = absl::FromUnixSeconds(1700000100);
  JobChanges changes;
  changes.job_id = "old";
  changes.job = updated;
  ASSERT_TRUE(store->Apply(changes).ok());
  store.reset();
  store = MustOpen();
  all = store->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE((*all)[0].job.root_cause->hang);
  EXPECT_EQ((*all)[0].job.root_cause->pid, 99);
  EXPECT_EQ((*all)[0].job.created, absl::FromUnixSeconds(1700000000));
  EXPECT_EQ((*all)[0].job.finished, absl::FromUnixSeconds(1700000100));
}

TEST_F(SqliteJobStateStoreTest, Apply_RecordOfAnotherJob_InvalidArgument) {
  std::unique_ptr<SqliteJobStateStore> store = MustOpen();
  JobChanges changes = CreateJob("a");
  changes.job->job_id = "b";
  absl::Status status = store->Apply(changes);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'a'"));
  EXPECT_THAT(status.message(), HasSubstr("'b'"));
  EXPECT_TRUE(store->LoadAll()->empty());
}

TEST_F(SqliteJobStateStoreTest, Apply_FailsMidBatch_NothingApplied) {
  std::unique_ptr<SqliteJobStateStore> store = MustOpen();
  ASSERT_TRUE(store->Apply(CreateJob("j")).ok());
  ASSERT_TRUE(store->Apply(Join("j", 0)).ok());
  Execute(
      "CREATE TRIGGER poison BEFORE INSERT ON job_nodes "
      "WHEN NEW.node_id = x'706F69736F6E' "  // 'poison'
      "BEGIN SELECT RAISE(ABORT, 'poisoned node'); END");
  JobChanges batch = Join("j", 1);
  batch.removed_nodes = {"node-0"};
  batch.upserted_nodes.push_back(Node("poison", 2));
  absl::Status status = store->Apply(batch);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("poisoned node"));

  absl::StatusOr<std::vector<JobSnapshot>> all = store->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].job.last_event_index, 1);
  ASSERT_EQ((*all)[0].nodes.size(), 1u);
  EXPECT_EQ((*all)[0].nodes[0].node_id, "node-0");
  EXPECT_TRUE(store->Apply(Join("j", 1)).ok());  // the store still works
}

TEST_F(SqliteJobStateStoreTest, Apply_JoinToLargeJob_WritesTwoRows) {
  std::unique_ptr<SqliteJobStateStore> store = MustOpen();
  JobChanges create = CreateJob("j");
  for (int i = 0; i < 64; ++i) {
    create.job->failures.push_back(FailureInfo{});
    create.job->excluded_nodes.push_back("excluded-" + std::to_string(i));
  }
  for (int n = 0; n < 1000; ++n) {
    create.upserted_nodes.push_back(Node("node-" + std::to_string(n), n));
  }
  ASSERT_TRUE(store->Apply(create).ok());
  // Count every row written from here on.
  std::string triggers = "CREATE TABLE write_log (tbl TEXT);";
  for (const char* table : {"jobs", "job_nodes", "job_failures", "job_excluded_nodes"}) {
    for (const char* op : {"INSERT", "UPDATE", "DELETE"}) {
      triggers += std::string("CREATE TRIGGER log_") + table + "_" + op + " AFTER " + op + " ON " +
                  table + " BEGIN INSERT INTO write_log VALUES ('" + table + "'); END;";
    }
  }
  Execute(triggers);

  ASSERT_TRUE(store->Apply(Join("j", 1000)).ok());
  EXPECT_EQ(QueryInt64("SELECT COUNT(*) FROM write_log"), 2);
  EXPECT_EQ(QueryInt64("SELECT COUNT(*) FROM write_log WHERE tbl = 'jobs'"), 1);

  // A record change with one more exclusion rewrites the jobs row and the
  // (bounded) failures, and adds one excluded row: not the other 64.
  Execute("DELETE FROM write_log");
  JobChanges exclude = CreateJob("j");
  exclude.job->failures = create.job->failures;
  exclude.job->excluded_nodes = create.job->excluded_nodes;
  exclude.job->excluded_nodes.push_back("excluded-new");
  ASSERT_TRUE(store->Apply(exclude).ok());
  EXPECT_EQ(QueryInt64("SELECT COUNT(*) FROM write_log WHERE tbl = "
                       "'job_excluded_nodes'"),
            1);
  EXPECT_EQ(QueryInt64("SELECT COUNT(*) FROM write_log WHERE tbl = "
                       "'job_nodes'"),
            0);
  absl::StatusOr<std::vector<JobSnapshot>> all = store->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)[0].nodes.size(), 1001u);
  EXPECT_EQ((*all)[0].job.excluded_nodes.size(), 65u);
}

TEST_F(SqliteJobStateStoreTest, Apply_4096SeparateJoins_CompleteInLooseBound) {
  constexpr int kNodes = 4096;
  std::unique_ptr<SqliteJobStateStore> store = MustOpen();
  ASSERT_TRUE(store->Apply(CreateJob("big")).ok());
  const absl::Time start = absl::Now();
  for (int n = 0; n < kNodes; ++n) {
    absl::Status status = store->Apply(Join("big", n));
    ASSERT_TRUE(status.ok()) << "join " << n << ": " << status;
  }
  const absl::Duration elapsed = absl::Now() - start;
  std::printf("%d joins, one Apply (one fsync) each: %s total, %s per Apply\n", kNodes,
              absl::FormatDuration(elapsed).c_str(),
              absl::FormatDuration(elapsed / kNodes).c_str());
  EXPECT_LT(elapsed, absl::Seconds(60));
  absl::StatusOr<std::vector<JobSnapshot>> all = store->LoadAll();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)[0].nodes.size(), static_cast<size_t>(kNodes));
  EXPECT_EQ((*all)[0].job.last_event_index, kNodes);
}

}  // namespace
}  // namespace ddp::rendezvous
