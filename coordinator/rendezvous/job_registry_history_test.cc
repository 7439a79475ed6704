// A job's history across a coordinator restart: the retained events come back
// with the same indexes and contents (WatchJob resumes where it was), bounded
// in the store as in memory; the store counts every event it appended.

#include <vector>

#include "coordinator/rendezvous/job_registry.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "coordinator/rendezvous/registry_test_util.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using testing::EventFields;
using testing::Exit;
using testing::NcclId;
using testing::Settings;

class JobHistoryTest : public ::testing::Test {
 protected:
  std::unique_ptr<JobRegistry> NewRegistry() {
    return std::make_unique<JobRegistry>(clock_, &store_, options_);
  }
  // Job "j" with nodes a and b running generation 1.
  void StartRunning(JobRegistry& registry) {
    for (const auto& [node, incarnation] : {std::pair{"a", 1}, {"b", 2}}) {
      RegisterRequest r;
      r.job_id = "j";
      r.node_id = node;
      r.incarnation = incarnation;
      r.address = std::string(node) + ".host";
      r.settings = Settings(2, 2, /*max_restarts=*/10);
      ASSERT_TRUE(registry.Register(r).ok());
    }
    ASSERT_TRUE(registry.ReportMasterInfo(Ref(1, 1), NewMasterInfo("", 29500, NcclId())).ok());
    Persist(registry);
  }
  // A worker of b fails in `generation`; the job restarts into the next one.
  void FailAndRestart(JobRegistry& registry, Generation generation) {
    // Past the crash-loop window (RestartPolicy): each failure restarts.
    clock_.Advance(absl::Seconds(11));
    ASSERT_TRUE(registry.Heartbeat(Ref(1, generation)).ok());
    ASSERT_TRUE(registry.Heartbeat(Ref(2, generation)).ok());
    ASSERT_TRUE(registry.WorkerExited(Ref(2, generation), Exit(1, 7, 0, "oom", clock_.Now())).ok());
    ASSERT_TRUE(registry.WorkersStopped(Ref(1, generation)).ok());
    ASSERT_TRUE(registry.WorkersStopped(Ref(2, generation)).ok());
    ASSERT_TRUE(
        registry
            .ReportMasterInfo(Ref(1, generation + 1),
                              NewMasterInfo("", static_cast<int>(29500 + generation), NcclId()))
            .ok());
    Persist(registry);
  }
  // The commit loop's pass: write, then deliver (WatchJob sees what was delivered).
  void Persist(JobRegistry& registry) {
    ASSERT_TRUE(registry.PersistPending().ok());
    registry.TakeOutbox();
  }
  static NodeRef Ref(Incarnation incarnation, Generation generation) {
    return NodeRef{"j", incarnation == 1 ? "a" : "b", incarnation, generation};
  }
  std::vector<JobEvent> StoredEvents() {
    absl::StatusOr<std::vector<JobSnapshot>> all = store_.LoadAll();
    EXPECT_TRUE(all.ok()) << all.status();
    return all.ok() && !all->empty() ? (*all)[0].events : std::vector<JobEvent>{};
  }

  FakeClock clock_;
  InMemoryJobStateStore store_;
  JobRegistryOptions options_;
};

TEST_F(JobHistoryTest, Restore_RestartCausesAndFailures_SameEventsAsBefore) {
  std::vector<JobEvent> before;
  {
    std::unique_ptr<JobRegistry> registry = NewRegistry();
    StartRunning(*registry);
    FailAndRestart(*registry, 1);
    absl::StatusOr<std::vector<JobEvent>> events = registry->EventsSince("j", 0, 1000);
    ASSERT_TRUE(events.ok()) << events.status();
    before = *events;
  }
  ASSERT_EQ(before.size(), 7u);  // created, 2 joined, opened, failed, restarting, opened
  std::unique_ptr<JobRegistry> registry = NewRegistry();
  ASSERT_TRUE(registry->Restore().ok());
  absl::StatusOr<std::vector<JobEvent>> after = registry->EventsSince("j", 0, 1000);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(EventFields(*after), EventFields(before));
  int restarting = 0, failed = 0;
  for (const JobEvent& event : *after) {
    if (event.type() == JobEvent::RESTARTING) {
      ++restarting;
      EXPECT_EQ(event.restart_cause(), RestartCause::WORKER_FAILURE);
    }
    if (event.type() == JobEvent::WORKER_FAILED) {
      ++failed;
      ASSERT_TRUE(event.has_failure());
      EXPECT_EQ(event.failure().exit_code(), 7);
      EXPECT_EQ(event.failure().message(), "oom");
    }
  }
  EXPECT_EQ(restarting, 1);
  EXPECT_EQ(failed, 1);
  // A resume from the middle gets the rest, and the next event follows on.
  absl::StatusOr<std::vector<JobEvent>> tail = registry->EventsSince("j", 3, 1000);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), before.size() - 3);
  EXPECT_EQ(tail->front().index(), 4);
}

TEST_F(JobHistoryTest, Retention_StoreKeepsWhatMemoryKeeps_AcrossRestart) {
  options_.limits.max_retained_events = 4;
  v1::Job status_before;
  std::vector<JobEvent> before;
  {
    std::unique_ptr<JobRegistry> registry = NewRegistry();
    StartRunning(*registry);
    for (Generation g = 1; g <= 3; ++g) FailAndRestart(*registry, g);
    status_before = *registry->GetJob("j", false);
    before = *registry->EventsSince("j", status_before.first_event_index() - 1, 1000);
  }
  ASSERT_GT(status_before.last_event_index(), 4);
  ASSERT_EQ(before.size(), 4u);
  // The store dropped the older events in the batches that dropped them.
  EXPECT_EQ(EventFields(StoredEvents()), EventFields(before));

  std::unique_ptr<JobRegistry> registry = NewRegistry();
  ASSERT_TRUE(registry->Restore().ok());
  const v1::Job status = *registry->GetJob("j", false);
  EXPECT_EQ(status.first_event_index(), status_before.first_event_index());
  EXPECT_EQ(status.last_event_index(), status_before.last_event_index());
  EXPECT_EQ(registry->EventsSince("j", 0, 1000).status().code(), absl::StatusCode::kOutOfRange);
  absl::StatusOr<std::vector<JobEvent>> after =
      registry->EventsSince("j", status.first_event_index() - 1, 1000);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(EventFields(*after), EventFields(before));
}

TEST_F(JobHistoryTest, RestoreWithALowerRetention_KeepsTheNewestAndTrimsTheStore) {
  {
    std::unique_ptr<JobRegistry> registry = NewRegistry();
    StartRunning(*registry);
    FailAndRestart(*registry, 1);
  }
  const std::vector<JobEvent> stored = StoredEvents();
  ASSERT_GT(stored.size(), 3u);
  options_.limits.max_retained_events = 3;
  std::unique_ptr<JobRegistry> registry = NewRegistry();
  ASSERT_TRUE(registry->Restore().ok());
  const std::vector<JobEvent> newest(stored.end() - 3, stored.end());
  const v1::Job status = *registry->GetJob("j", false);
  EXPECT_EQ(status.first_event_index(), newest.front().index());
  EXPECT_EQ(EventFields(*registry->EventsSince("j", newest.front().index() - 1, 100)),
            EventFields(newest));
  registry->Tick();  // the next pass writes the job's changes: the store trims too
  Persist(*registry);
  EXPECT_EQ(EventFields(StoredEvents()), EventFields(newest));
}

TEST_F(JobHistoryTest, EventsNotYetWritten_NotStoredNorCounted) {
  std::unique_ptr<JobRegistry> registry = NewRegistry();
  StartRunning(*registry);
  const size_t stored = StoredEvents().size();
  store_.FailWith(absl::UnavailableError("disk full"));
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_TRUE(registry->WorkerExited(Ref(2, 1), Exit(0, 1, 0, "", clock_.Now())).ok());
  EXPECT_FALSE(registry->PersistPending().ok());
  EXPECT_EQ(StoredEvents().size(), stored);
  EXPECT_EQ(store_.LoadEventCounts()->Of(JobEvent::WORKER_FAILED), 0);
  store_.FailWith(absl::OkStatus());
  Persist(*registry);  // the batch is taken again
  EXPECT_GT(StoredEvents().size(), stored);
  EXPECT_EQ(store_.LoadEventCounts()->Of(JobEvent::WORKER_FAILED), 1);
}

TEST_F(JobHistoryTest, EventCounts_EveryEventCountedOnce_RemovalKeepsThem) {
  std::unique_ptr<JobRegistry> registry = NewRegistry();
  StartRunning(*registry);
  FailAndRestart(*registry, 1);
  FailAndRestart(*registry, 2);
  const int64_t last = registry->GetJob("j", false)->last_event_index();
  absl::StatusOr<JobEventCounts> counts = store_.LoadEventCounts();
  ASSERT_TRUE(counts.ok());
  int64_t total = 0;
  for (const auto& [key, count] : counts->counts) total += count;
  EXPECT_EQ(total, last);
  EXPECT_EQ(counts->Of(JobEvent::RESTARTING, RestartCause::WORKER_FAILURE), 2);
  EXPECT_EQ(counts->Of(JobEvent::WORKER_FAILED), 2);
  EXPECT_EQ(counts->Of(JobEvent::GENERATION_OPENED), 3);
  EXPECT_EQ(counts->Of(JobEvent::JOB_CREATED), 1);

  const absl::Status cancelled =
      testing::WhileWriting(*registry, [&] { return registry->CancelJob("j", "enough"); });
  ASSERT_TRUE(cancelled.ok()) << cancelled;
  const absl::Status removed =
      testing::WhileWriting(*registry, [&] { return registry->RemoveJob("j"); });
  ASSERT_TRUE(removed.ok()) << removed;
  EXPECT_TRUE(store_.LoadAll()->empty());
  counts = store_.LoadEventCounts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->Of(JobEvent::RESTARTING, RestartCause::WORKER_FAILURE), 2);
  EXPECT_EQ(counts->Of(JobEvent::JOB_FINISHED), 1);
}

TEST_F(JobHistoryTest, NewRun_OldRunsEventsDropped_NewRunNumberedFromOne) {
  std::unique_ptr<JobRegistry> registry = NewRegistry();
  StartRunning(*registry);
  const absl::Status cancelled =
      testing::WhileWriting(*registry, [&] { return registry->CancelJob("j", "requeued"); });
  ASSERT_TRUE(cancelled.ok()) << cancelled;
  const int64_t first_run_events = registry->GetJob("j", false)->last_event_index();
  RegisterRequest r;
  r.job_id = "j";
  r.node_id = "a";
  r.incarnation = 3;  // a new agent: run 2
  r.address = "a.host";
  r.settings = Settings(2, 2);
  ASSERT_TRUE(registry->Register(r).ok());
  Persist(*registry);
  ASSERT_EQ(registry->GetJob("j", false)->run(), 2);
  const std::vector<JobEvent> stored = StoredEvents();
  ASSERT_FALSE(stored.empty());
  EXPECT_EQ(stored.front().index(), 1);
  EXPECT_LT(static_cast<int64_t>(stored.size()), first_run_events);
  registry = NewRegistry();
  ASSERT_TRUE(registry->Restore().ok());
  EXPECT_EQ(EventFields(*registry->EventsSince("j", 0, 100)), EventFields(stored));
}

TEST_F(JobHistoryTest, Restore_StoredEventBeyondTheJobsLastIndex_DataLoss) {
  JobRecord record = NewJobRecord("j", Settings(1, 1), absl::Time());
  record.set_last_event_index(2);
  JobChanges changes;
  changes.job_id = "j";
  changes.job = record;
  JobEvent event;
  event.set_job_id("j");
  event.set_index(5);
  changes.appended_events = {event};
  ASSERT_TRUE(store_.Apply(changes).ok());
  absl::Status restored = NewRegistry()->Restore();
  EXPECT_EQ(restored.code(), absl::StatusCode::kDataLoss) << restored;
  EXPECT_NE(restored.message().find("stored event 5"), std::string::npos) << restored;
}

}  // namespace
}  // namespace ddp::rendezvous
