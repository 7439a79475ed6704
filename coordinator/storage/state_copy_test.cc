// CopyState from a real SQLite store (keys, leases, deletes, jobs with nodes,
// past runs and events) into an empty store: everything but the KV watch history
// arrives, in one batch; a store that is not empty is refused untouched; a
// copy stopped before its compaction is finished by the next run.

#include "coordinator/storage/state_copy.h"

#include <stdlib.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/storage/job_state_store_conformance.h"
#include "coordinator/storage/memory_state_store.h"
#include "coordinator/storage/sqlite_state_store.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
// Only its helpers are used here (the suite runs in job_state_store_conformance_test).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(JobStateStoreConformanceTest);
}  // namespace ddp::rendezvous

namespace ddp::storage {
namespace {

namespace conformance = rendezvous::conformance;
using rendezvous::JobRecord;
using rendezvous::JobSnapshot;

std::string TempDb() {
  const char* root = getenv("TEST_TMPDIR");
  std::string pattern = std::string(root != nullptr ? root : "/tmp") + "/copyXXXXXX";
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern + "/coordinator.db";
}

std::unique_ptr<SqliteStateStore> MustOpen(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteStateStore>> store = SqliteStateStore::Open(path);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(store).value() : nullptr;
}

kv::KeyValue Key(const std::string& ns, const std::string& key, kv::Revision created,
                 kv::Revision modified, int64_t version, kv::LeaseId lease = 0) {
  return kv::KeyValue{ns, key, "value of " + key, created, modified, version, lease};
}

// Three batches: puts, a lease and a key on it, an overwrite and a delete.
void WriteKeys(commit::StateStore& store) {
  kv::KvWriteBatch first;
  first.revision = 2;
  first.upserts = {Key("train", "a", 1, 1, 1), Key("train", "gone", 2, 2, 1)};
  for (const auto& kv : first.upserts) first.events.push_back({kv::EventType::kPut, kv});
  ASSERT_TRUE(store.Commit(first).ok());
  kv::KvWriteBatch second;
  second.revision = 3;
  second.lease_grants = {{7, 10000}};
  second.next_lease_id = 8;
  second.upserts = {Key("other", std::string("bin\0key", 7), 3, 3, 1, 7)};
  second.events.push_back({kv::EventType::kPut, second.upserts[0]});
  ASSERT_TRUE(store.Commit(second).ok());
  kv::KvWriteBatch third;
  third.revision = 5;
  third.upserts = {Key("train", "a", 1, 4, 2)};
  third.deletes = {{"train", "gone"}};
  third.events.push_back({kv::EventType::kPut, third.upserts[0]});
  kv::KeyValue gone = Key("train", "gone", 2, 5, 0);
  third.events.push_back({kv::EventType::kDelete, gone});
  ASSERT_TRUE(store.Commit(third).ok());
}

// Job "j" on its third run (two past runs) with two nodes; job "k" alone.
void WriteJobs(commit::StateStore& store) {
  JobRecord run = conformance::FullRecord("j");
  run.set_run(1);
  ASSERT_TRUE(store.Apply(conformance::CreateJob(run, {conformance::Node("x", 0)})).ok());
  for (int next = 2; next <= 3; ++next) {
    JobRecord replacement = conformance::FullRecord("j");
    replacement.set_run(next);
    replacement.set_generation(next);
    ASSERT_TRUE(
        store
            .ApplyBatch(conformance::NewRun(run, replacement, 1,
                                            {conformance::Node("a", 0), conformance::Node("b", 1)}))
            .ok());
    run = replacement;
  }
  // The current run's events, the oldest ones no longer retained.
  rendezvous::JobChanges events = conformance::NodeChanges("j", {});
  events.appended_events = conformance::Events("j", 1, 12);
  ASSERT_TRUE(store.Apply(events).ok());
  events.appended_events.clear();
  events.drop_events_before = 4;
  ASSERT_TRUE(store.Apply(events).ok());
  JobRecord other = conformance::FullRecord("k");
  other.set_run(1);
  ASSERT_TRUE(store.Apply(conformance::CreateJob(other)).ok());
}

std::vector<kv::KeyValue> SortedKeys(const kv::KeySpace& space) {
  std::vector<kv::KeyValue> keys;
  space.ForEach([&](const kv::KeyValue& kv) { keys.push_back(kv); });
  std::sort(keys.begin(), keys.end(), [](const kv::KeyValue& a, const kv::KeyValue& b) {
    return std::tie(a.ns, a.key) < std::tie(b.ns, b.key);
  });
  return keys;
}

std::vector<JobSnapshot> SortedJobs(commit::StateStore& store) {
  absl::StatusOr<std::vector<JobSnapshot>> jobs = store.LoadAll();
  EXPECT_TRUE(jobs.ok()) << jobs.status();
  std::vector<JobSnapshot> out = jobs.ok() ? *jobs : std::vector<JobSnapshot>{};
  std::sort(out.begin(), out.end(), [](const JobSnapshot& a, const JobSnapshot& b) {
    return a.job.job_id() < b.job.job_id();
  });
  for (JobSnapshot& job : out) {
    std::sort(job.nodes.begin(), job.nodes.end(),
              [](const auto& a, const auto& b) { return a.node_id() < b.node_id(); });
  }
  return out;
}

void ExpectSameState(commit::StateStore& got, commit::StateStore& want) {
  absl::StatusOr<kv::PersistedKvState> g = got.Load();
  absl::StatusOr<kv::PersistedKvState> w = want.Load();
  ASSERT_TRUE(g.ok() && w.ok()) << g.status() << " " << w.status();
  EXPECT_EQ(g->revision, w->revision);
  EXPECT_EQ(g->next_lease_id, w->next_lease_id);
  EXPECT_EQ(SortedKeys(g->keys), SortedKeys(w->keys));
  EXPECT_EQ(g->leases, w->leases);
  EXPECT_EQ(g->compacted_revision, w->revision) << "history not copied: compacted to the revision";
  std::vector<JobSnapshot> got_jobs = SortedJobs(got);
  std::vector<JobSnapshot> want_jobs = SortedJobs(want);
  ASSERT_EQ(got_jobs.size(), want_jobs.size());
  for (size_t i = 0; i < got_jobs.size(); ++i) {
    conformance::ExpectSameRecord(got_jobs[i].job, want_jobs[i].job);
    EXPECT_EQ(conformance::FieldsOf(got_jobs[i].nodes), conformance::FieldsOf(want_jobs[i].nodes));
    EXPECT_EQ(conformance::FieldsOf(got_jobs[i].events),
              conformance::FieldsOf(want_jobs[i].events));
    ASSERT_EQ(got_jobs[i].past_runs.size(), want_jobs[i].past_runs.size());
    for (size_t r = 0; r < got_jobs[i].past_runs.size(); ++r) {
      conformance::ExpectSameRecord(got_jobs[i].past_runs[r], want_jobs[i].past_runs[r]);
    }
  }
}

class StateCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_ = MustOpen(TempDb());
    ASSERT_NE(source_, nullptr);
    WriteKeys(*source_);
    WriteJobs(*source_);
  }
  std::unique_ptr<SqliteStateStore> source_;
};

TEST_F(StateCopyTest, EverythingButHistoryArrivesInADurableTarget) {
  const std::string path = TempDb();
  auto target = MustOpen(path);
  absl::StatusOr<StateCopySummary> summary = CopyState(*source_, *target);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->revision, 5);
  EXPECT_EQ(summary->keys, 2);
  EXPECT_EQ(summary->leases, 1);
  EXPECT_EQ(summary->jobs, 2);
  EXPECT_EQ(summary->past_runs, 2);
  EXPECT_EQ(summary->nodes, 2);
  EXPECT_EQ(summary->events, 9);  // 4-12 of j
  EXPECT_FALSE(summary->finished_earlier_copy);
  target.reset();
  target = MustOpen(path);  // from disk
  ExpectSameState(*target, *source_);
  // A watch from before the copy is told its history is gone; from the
  // copied revision on, it works.
  EXPECT_EQ(target->ReadEvents("train", "", 1, 10).status().code(), absl::StatusCode::kOutOfRange);
  absl::StatusOr<std::vector<kv::Event>> after = target->ReadEvents("train", "", 6, 10);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->empty());
  // And the next write continues the revisions.
  kv::KvWriteBatch next;
  next.revision = 6;
  next.upserts = {Key("train", "b", 6, 6, 1)};
  EXPECT_TRUE(target->Commit(next).ok());
}

TEST_F(StateCopyTest, IntoTheMemoryStore) {
  MemoryStateStore target;
  ASSERT_TRUE(CopyState(*source_, target).ok());
  ExpectSameState(target, *source_);
}

TEST_F(StateCopyTest, ATargetThatIsNotEmptyIsRefusedUntouched) {
  MemoryStateStore target;
  kv::KvWriteBatch one;
  one.revision = 1;
  one.upserts = {Key("mine", "k", 1, 1, 1)};
  ASSERT_TRUE(target.Commit(one).ok());
  absl::StatusOr<StateCopySummary> summary = CopyState(*source_, target);
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kFailedPrecondition) << summary.status();
  EXPECT_NE(summary.status().message().find("not empty (revision 1, 1 keys, 0 jobs)"),
            std::string::npos)
      << summary.status();
  EXPECT_EQ(target.Load()->keys.size(), 1u);
  EXPECT_TRUE(target.LoadAll()->empty());
}

TEST_F(StateCopyTest, AnEmptySourceCopiesNothing) {
  auto empty = MustOpen(TempDb());
  MemoryStateStore target;
  absl::StatusOr<StateCopySummary> summary = CopyState(*empty, target);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->revision, 0);
  EXPECT_EQ(target.Load()->revision, 0);
}

// Forwards to a store, except that its first Compact fails (a crash or a
// lost etcd answer between the batch and the compaction).
class CompactFailsOnce : public commit::StateStore {
 public:
  explicit CompactFailsOnce(commit::StateStore& inner) : inner_(inner) {}
  absl::Status CommitState(const commit::StateBatch& batch) override {
    return inner_.CommitState(batch);
  }
  absl::StatusOr<kv::PersistedKvState> Load() override { return inner_.Load(); }
  absl::StatusOr<std::vector<kv::Event>> ReadEvents(const std::string& ns,
                                                    const std::string& prefix, kv::Revision from,
                                                    size_t max) override {
    return inner_.ReadEvents(ns, prefix, from, max);
  }
  absl::Status Compact(kv::Revision revision) override {
    if (failed_) return inner_.Compact(revision);
    failed_ = true;
    return absl::UnknownError("injected: compaction outcome unknown");
  }
  absl::StatusOr<std::vector<JobSnapshot>> LoadAll() const override { return inner_.LoadAll(); }
  absl::StatusOr<rendezvous::JobEventCounts> LoadEventCounts() const override {
    return inner_.LoadEventCounts();
  }
  absl::StatusOr<std::vector<v1::Node>> LoadNodes() const override { return inner_.LoadNodes(); }
  absl::StatusOr<std::optional<v1::QuarantinePolicy>> LoadQuarantinePolicy() const override {
    return inner_.LoadQuarantinePolicy();
  }

 private:
  commit::StateStore& inner_;
  bool failed_ = false;
};

TEST_F(StateCopyTest, ACopyStoppedBeforeItsCompactionIsFinishedByTheNextRun) {
  MemoryStateStore target;
  CompactFailsOnce flaky(target);
  EXPECT_EQ(CopyState(*source_, flaky).status().code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(target.Load()->compacted_revision, 0);
  absl::StatusOr<StateCopySummary> again = CopyState(*source_, target);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->finished_earlier_copy);
  ExpectSameState(target, *source_);
}

}  // namespace
}  // namespace ddp::storage
