// JobRegistry with a store: changes are written in batches by a
// writer (PersistPending) and nothing they produced leaves before that.

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "coordinator/rendezvous/job_registry.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using testing::Settings;

RegisterRequest Req(const std::string& node, Incarnation incarnation) {
  RegisterRequest r;
  r.job_id = "j";
  r.node_id = node;
  r.incarnation = incarnation;
  r.address = node + ".host";
  r.settings = Settings(2, 2);
  return r;
}

class JobRegistryWriteBehind : public ::testing::Test {
 protected:
  // Counts on_pending calls; scheduler calls wait at most 5 s.
  JobRegistryOptions Options() {
    JobRegistryOptions options;
    options.on_pending = [this] { pending_signals_.fetch_add(1); };
    options.write_timeout = absl::Seconds(5);
    return options;
  }

  FakeClock clock_;
  InMemoryJobStateStore store_;
  std::atomic<int> pending_signals_{0};
};

TEST_F(JobRegistryWriteBehind, MessagesHeldUntilBatchWritten) {
  JobRegistry registry(clock_, &store_, Options());
  ASSERT_TRUE(registry.Register(Req("a", 1)).ok());
  ASSERT_TRUE(registry.Register(Req("b", 2)).ok());
  EXPECT_EQ(pending_signals_.load(), 1);  // only on empty -> pending
  EXPECT_EQ(store_.apply_count(), 0);
  EXPECT_TRUE(registry.HasPendingWrites());
  // Rendezvous closed at max nodes: the master-info request is held.
  EXPECT_TRUE(registry.TakeOutbox().empty());

  ASSERT_TRUE(registry.PersistPending().ok());
  EXPECT_EQ(store_.apply_count(), 1);  // both joins in one batch
  EXPECT_FALSE(registry.HasPendingWrites());
  Outbox out = registry.TakeOutbox();
  EXPECT_FALSE(out.messages.empty());
  EXPECT_FALSE(out.events.empty());
  absl::StatusOr<std::vector<JobSnapshot>> stored = store_.LoadAll();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].nodes.size(), 2u);
}

TEST_F(JobRegistryWriteBehind, EventsSince_OnlyEventsAlreadyTaken) {
  JobRegistry registry(clock_, &store_, Options());
  ASSERT_TRUE(registry.Register(Req("a", 1)).ok());
  absl::StatusOr<std::vector<JobEvent>> events = registry.EventsSince("j", 0, 100);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());  // not durable yet
  ASSERT_TRUE(registry.PersistPending().ok());
  Outbox out = registry.TakeOutbox();
  ASSERT_FALSE(out.events.empty());
  events = registry.EventsSince("j", 0, 100);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), out.events.size());
}

TEST_F(JobRegistryWriteBehind, StoreFails_HeldUntilARetrySucceeds) {
  JobRegistry registry(clock_, &store_, Options());
  ASSERT_TRUE(registry.Register(Req("a", 1)).ok());
  ASSERT_TRUE(registry.Register(Req("b", 2)).ok());
  store_.FailWith(absl::UnavailableError("disk full"));
  absl::Status status = registry.PersistPending();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("disk full"), std::string::npos);
  EXPECT_TRUE(registry.HasPendingWrites());
  EXPECT_TRUE(registry.TakeOutbox().empty());
  store_.FailWith(absl::OkStatus());
  ASSERT_TRUE(registry.PersistPending().ok());
  EXPECT_FALSE(registry.TakeOutbox().empty());
}

TEST_F(JobRegistryWriteBehind, WhenDurable_RunsAfterTheWrite) {
  JobRegistry registry(clock_, &store_, Options());
  bool ran = false;
  registry.WhenDurable(registry.DurabilityMark(), [&] { ran = true; });
  EXPECT_TRUE(ran);  // nothing pending: at once
  ran = false;
  ASSERT_TRUE(registry.Register(Req("a", 1)).ok());
  registry.WhenDurable(registry.DurabilityMark(), [&] { ran = true; });
  EXPECT_FALSE(ran);
  ASSERT_TRUE(registry.PersistPending().ok());
  EXPECT_TRUE(ran);
}

TEST_F(JobRegistryWriteBehind, SchedulerCalls_ReturnOnceDurable) {
  JobRegistry registry(clock_, &store_, Options());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load()) {
      (void)registry.PersistPending();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  ASSERT_TRUE(registry.CreateJob("s", Settings(1, 2)).ok());
  // Returned only after the job record was written.
  absl::StatusOr<std::vector<JobSnapshot>> stored = store_.LoadAll();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->size(), 1u);
  ASSERT_TRUE(registry.CancelJob("s", "test").ok());
  ASSERT_TRUE(registry.RemoveJob("s").ok());
  stored = store_.LoadAll();
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->empty());
  stop.store(true);
  writer.join();
}

TEST_F(JobRegistryWriteBehind, SchedulerCall_StoreDown_UnavailableAfterTimeout) {
  JobRegistryOptions options = Options();
  options.write_timeout = absl::Milliseconds(50);
  options.read_timeout = absl::Milliseconds(50);
  JobRegistry registry(clock_, &store_, options);
  absl::StatusOr<v1::Job> created = registry.CreateJob("s", Settings(1, 2));
  EXPECT_EQ(created.status().code(), absl::StatusCode::kUnknown);
  EXPECT_NE(created.status().message().find("not durable"), std::string::npos);
  // Readers never see what is not durable (no dirty read).
  EXPECT_EQ(registry.GetJob("s", false).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(registry.ListJobs().status().code(), absl::StatusCode::kUnavailable);
  // Still queued: a writer makes it durable later, and then readers see it.
  ASSERT_TRUE(registry.PersistPending().ok());
  EXPECT_TRUE(registry.GetJob("s", false).ok());
  EXPECT_EQ(registry.ListJobs()->size(), 1u);
  absl::StatusOr<std::vector<JobSnapshot>> stored = store_.LoadAll();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->size(), 1u);
}

// A finished job id registered again by a new agent starts a new run; the
// removal of the old run and the new one are one batch, and a restart sees
// only the new run.
TEST_F(JobRegistryWriteBehind, FinishedJobIdRegisteredAgain_NewRunSurvivesRestart) {
  {
    JobRegistryOptions options = Options();
    options.write_timeout = absl::Milliseconds(10);  // no writer thread here
    JobRegistry registry(clock_, &store_, options);
    RegisterRequest first = Req("a", 1);
    first.settings = Settings(1, 1);
    ASSERT_TRUE(registry.Register(first).ok());
    ASSERT_TRUE(registry.PersistPending().ok());
    (void)registry.CancelJob("j", "done");  // UNKNOWN: made, durable below
    ASSERT_TRUE(registry.PersistPending().ok());
    ASSERT_EQ(registry.GetJob("j", false)->state(), v1::CANCELLED);
    // The old agent resuming is told the run is over: no new run.
    auto resumed = registry.Register(first);
    ASSERT_TRUE(resumed.ok());
    EXPECT_EQ(resumed->state, JobState::kCancelled);
    RegisterRequest again = Req("a", 2);
    again.settings = Settings(1, 1);
    auto rerun = registry.Register(again);
    ASSERT_TRUE(rerun.ok()) << rerun.status();
    EXPECT_TRUE(rerun->created_job);
    ASSERT_TRUE(registry.PersistPending().ok());
    EXPECT_NE(registry.GetJob("j", false)->state(), v1::CANCELLED);
  }
  JobRegistry restored(clock_, &store_, {});
  ASSERT_TRUE(restored.Restore().ok());
  auto job = restored.GetJob("j", false);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_NE(job->state(), v1::CANCELLED);
}

TEST_F(JobRegistryWriteBehind, ManyJoins_FewBatches_RestoreSeesAll) {
  {
    JobRegistryOptions options = Options();
    options.write_timeout = absl::Milliseconds(10);
    JobRegistry registry(clock_, &store_, options);
    ASSERT_TRUE(registry.CreateJob("big", Settings(1, 4096)).status().code() ==
                absl::StatusCode::kUnknown);  // no writer yet
    for (int i = 0; i < 1000; ++i) {
      RegisterRequest r = Req(absl::StrCat("n", i), i + 1);
      r.job_id = "big";
      r.settings = Settings(1, 4096);
      ASSERT_TRUE(registry.Register(r).ok());
      if (i % 250 == 249) {
        ASSERT_TRUE(registry.PersistPending().ok());
      }
    }
  }
  EXPECT_EQ(store_.apply_count(), 4);
  JobRegistry restored(clock_, &store_, {});
  ASSERT_TRUE(restored.Restore().ok());
  absl::StatusOr<v1::Job> job = restored.GetJob("big", true);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->registered_nodes(), 1000);
}

}  // namespace
}  // namespace ddp::rendezvous
