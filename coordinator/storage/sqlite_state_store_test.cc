// What SqliteStateStore adds to the two conformance suites it passes: one
// transaction for a batch's KV and job parts, the schema upgrade of a KV-only
// file, and the import of an earlier release's jobs.db (the end-to-end version,
// with a data dir written by that release: tests/migration).

#include "coordinator/storage/sqlite_state_store.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "coordinator/storage/job_state_store_conformance.h"
#include "coordinator/storage/legacy_jobs_database.h"
#include "coordinator/storage/sqlite_database.h"
#include "coordinator/storage/sqlite_job_tables.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
// Only its helpers are used here (the suite runs in job_state_store_conformance_test).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(JobStateStoreConformanceTest);
}  // namespace ddp::rendezvous

namespace ddp::storage {
namespace {

using rendezvous::JobChanges;
using rendezvous::JobRecord;
using rendezvous::JobSnapshot;
namespace conformance = rendezvous::conformance;

std::string TempDir() {
  const char* root = getenv("TEST_TMPDIR");
  std::string pattern = std::string(root != nullptr ? root : "/tmp") + "/stateXXXXXX";
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

kv::KvWriteBatch PutOne(kv::Revision revision, const std::string& key) {
  kv::KvWriteBatch batch;
  batch.revision = revision;
  kv::KeyValue kv{"ns", key, "v", revision, revision, 1, 0};
  batch.upserts.push_back(kv);
  batch.events.push_back(kv::Event{kv::EventType::kPut, kv});
  return batch;
}

std::unique_ptr<SqliteStateStore> MustOpen(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteStateStore>> store = SqliteStateStore::Open(path);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(store).value() : nullptr;
}

TEST(SqliteStateStoreTest, KvAndJobParts_OneTransaction_BothSurviveReopen) {
  const std::string path = TempDir() + "/coordinator.db";
  {
    std::unique_ptr<SqliteStateStore> store = MustOpen(path);
    commit::StateBatch batch;
    batch.kv = PutOne(1, "k");
    batch.jobs.push_back(
        conformance::CreateJob(conformance::FullRecord("j"), {conformance::Node("a", 0)}));
    ASSERT_TRUE(store->CommitState(batch).ok());
  }
  std::unique_ptr<SqliteStateStore> store = MustOpen(path);
  absl::StatusOr<kv::PersistedKvState> kv = store->Load();
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(kv->revision, 1);
  ASSERT_EQ(kv->keys.size(), 1u);
  absl::StatusOr<std::vector<JobSnapshot>> jobs = store->LoadAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  conformance::ExpectSameRecord((*jobs)[0].job, conformance::FullRecord("j"));
  EXPECT_EQ(conformance::NodeIds((*jobs)[0]), std::vector<std::string>{"a"});
}

TEST(SqliteStateStoreTest, JobPartRefused_KvPartNotAppliedEither) {
  const std::string path = TempDir() + "/coordinator.db";
  std::unique_ptr<SqliteStateStore> store = MustOpen(path);
  commit::StateBatch batch;
  batch.kv = PutOne(1, "k");
  // Node changes for a job that has no record: the whole batch is refused.
  batch.jobs.push_back(conformance::NodeChanges("ghost", {conformance::Node("a", 0)}, {}));
  EXPECT_EQ(store->CommitState(batch).code(), absl::StatusCode::kInvalidArgument);
  store.reset();
  store = MustOpen(path);
  absl::StatusOr<kv::PersistedKvState> kv = store->Load();
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->revision, 0);
  EXPECT_TRUE(kv->keys.empty());
  // And the store goes on at the same revision.
  EXPECT_TRUE(store->Commit(PutOne(1, "k")).ok());
}

TEST(SqliteStateStoreTest, KvOnlyFileOfAnEarlierRelease_GainsTheJobTables) {
  const std::string path = TempDir() + "/coordinator.db";
  {
    absl::StatusOr<std::unique_ptr<kv::SqliteKvBackend>> old = kv::SqliteKvBackend::Open(path);
    ASSERT_TRUE(old.ok()) << old.status();
    ASSERT_TRUE((*old)->Commit(PutOne(1, "k")).ok());
  }
  absl::StatusOr<bool> expects = ExpectsLegacyJobsDatabase(path, path + ".absent");
  ASSERT_TRUE(expects.ok());
  EXPECT_TRUE(*expects) << "a KV-only file belongs beside a jobs.db";
  std::unique_ptr<SqliteStateStore> store = MustOpen(path);
  ASSERT_TRUE(store->Apply(conformance::CreateJob(conformance::FullRecord("j"))).ok());
  absl::StatusOr<kv::PersistedKvState> kv = store->Load();
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->revision, 1);
  store.reset();
  expects = ExpectsLegacyJobsDatabase(path, path + ".absent");
  ASSERT_TRUE(expects.ok());
  EXPECT_FALSE(*expects);
  expects = ExpectsLegacyJobsDatabase(path + ".none", path + ".absent");
  ASSERT_TRUE(expects.ok());
  EXPECT_FALSE(*expects) << "a new data dir";
}

// Schema version 4 adds the job events: a version-3 file (jobs, no events)
// opens at version 4 with its jobs as they were, and their events go on from
// the stored last index.
TEST(SqliteStateStoreTest, Version3File_GainsTheEventTables_JobsKeptEventsGoOn) {
  const std::string path = TempDir() + "/coordinator.db";
  JobRecord record = conformance::FullRecord("j");
  record.set_last_event_index(7);  // events 1-7 were kept in memory only
  {
    std::vector<SqliteMigration> version3 = SqliteStateStore::SchemaMigrations();
    ASSERT_EQ(version3.size(), 6u);  // KV (1-2), jobs (3), events (4), fleet (5, 6)
    version3.resize(3);
    kv::SqliteKvBackendOptions options;
    options.schema = version3;
    absl::StatusOr<std::unique_ptr<kv::SqliteKvBackend>> old =
        kv::SqliteKvBackend::Open(path, options);
    ASSERT_TRUE(old.ok()) << old.status();
    ASSERT_TRUE((*old)->Commit(PutOne(1, "k")).ok());
    ASSERT_TRUE((*old)
                    ->CommitWith(nullptr,
                                 [&](SqliteDatabase& db) {
                                   return WriteJobChanges(
                                       db,
                                       conformance::CreateJob(record, {conformance::Node("a", 0)}));
                                 })
                    .ok());
  }
  {
    absl::StatusOr<std::unique_ptr<SqliteDatabase>> db = SqliteDatabase::Open(path);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(*(*db)->UserVersion(), 3);
    EXPECT_FALSE((*db)->Execute("SELECT count(*) FROM job_events").ok()) << "no table yet";
  }
  std::unique_ptr<SqliteStateStore> store = MustOpen(path);
  {
    absl::StatusOr<std::unique_ptr<SqliteDatabase>> db = SqliteDatabase::Open(path);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(*(*db)->UserVersion(), 6) << "job events (4), fleet nodes (5), fleet settings (6)";
  }
  absl::StatusOr<std::vector<JobSnapshot>> jobs = store->LoadAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  conformance::ExpectSameRecord((*jobs)[0].job, record);
  EXPECT_EQ(conformance::NodeIds((*jobs)[0]), std::vector<std::string>{"a"});
  EXPECT_TRUE((*jobs)[0].events.empty());
  absl::StatusOr<rendezvous::JobEventCounts> counts = store->LoadEventCounts();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_TRUE(counts->counts.empty());
  // The next events follow the stored index; the KV part is untouched.
  JobChanges next = conformance::NodeChanges("j", {});
  next.counters = rendezvous::JobCounters{9, record.next_join_seq()};
  next.appended_events = conformance::Events("j", 8, 9);
  ASSERT_TRUE(store->Apply(next).ok());
  store.reset();
  store = MustOpen(path);
  jobs = store->LoadAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(conformance::FieldsOf((*jobs)[0].events),
            conformance::FieldsOf(conformance::Events("j", 8, 9)));
  EXPECT_EQ((*jobs)[0].job.last_event_index(), 9);
  EXPECT_EQ(store->Load()->revision, 1);
  rendezvous::JobEventCounts want;
  for (const rendezvous::JobEvent& event : next.appended_events) want.Add(event);
  counts = store->LoadEventCounts();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->counts, want.counts);
}

// A copy of the jobs.db the previous release wrote (tests/migration): three
// jobs, one with nodes, failures and a past run.
void CopyPreviousReleaseJobsDatabase(const std::string& to) {
  const std::string from = std::string(getenv("TEST_SRCDIR")) + "/" + getenv("TEST_WORKSPACE") +
                           "/tests/migration/previous_release_data_dir/jobs.db";
  std::filesystem::copy_file(from, to);
  std::filesystem::permissions(to, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
}

TEST(SqliteStateStoreTest, ImportJobsDatabase_SameJobsThenRenamed_OnlyOnce) {
  const std::string dir = TempDir();
  const std::string jobs_db = dir + "/jobs.db";
  CopyPreviousReleaseJobsDatabase(jobs_db);
  CopyPreviousReleaseJobsDatabase(dir + "/reference.db");
  absl::StatusOr<std::vector<JobSnapshot>> want = ReadLegacyJobsDatabase(dir + "/reference.db");
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), 3u);
  ASSERT_EQ((*want)[2].past_runs.size(), 1u);  // failed-twice: run 1
  ASSERT_EQ((*want)[2].nodes.size(), 2u);

  std::unique_ptr<SqliteStateStore> store = MustOpen(dir + "/coordinator.db");
  absl::StatusOr<int> imported = store->ImportJobsDatabase(jobs_db);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(*imported, 3);
  EXPECT_FALSE(Exists(jobs_db));
  EXPECT_TRUE(Exists(jobs_db + ".imported"));
  absl::StatusOr<std::vector<JobSnapshot>> got = store->LoadAll();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size(); ++i) {
    conformance::ExpectSameRecord((*got)[i].job, (*want)[i].job);
    EXPECT_EQ(conformance::NodeIds((*got)[i]), conformance::NodeIds((*want)[i]));
    ASSERT_EQ((*got)[i].past_runs.size(), (*want)[i].past_runs.size());
    for (size_t r = 0; r < (*got)[i].past_runs.size(); ++r) {
      conformance::ExpectSameRecord((*got)[i].past_runs[r], (*want)[i].past_runs[r]);
    }
  }

  // A crash after the import's commit but before the rename leaves jobs.db
  // in place: the next start only renames it.
  ASSERT_EQ(std::rename((jobs_db + ".imported").c_str(), jobs_db.c_str()), 0);
  imported = store->ImportJobsDatabase(jobs_db);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(*imported, 0);
  EXPECT_FALSE(Exists(jobs_db));
  got = store->LoadAll();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 3u);

  // Nothing to import: nothing happens.
  imported = store->ImportJobsDatabase(jobs_db);
  ASSERT_TRUE(imported.ok());
  EXPECT_EQ(*imported, 0);
}

TEST(SqliteStateStoreTest, ImportOfADamagedJobsDatabase_RefusedNamingIt) {
  const std::string dir = TempDir();
  const std::string jobs_db = dir + "/jobs.db";
  FILE* f = std::fopen(jobs_db.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("this is not a database, but it is long enough to have a header........", f);
  std::fclose(f);
  std::unique_ptr<SqliteStateStore> store = MustOpen(dir + "/coordinator.db");
  absl::StatusOr<int> imported = store->ImportJobsDatabase(jobs_db);
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find(jobs_db), std::string::npos) << imported.status();
  EXPECT_TRUE(Exists(jobs_db)) << "a refused import must leave the file alone";
}

}  // namespace
}  // namespace ddp::storage
