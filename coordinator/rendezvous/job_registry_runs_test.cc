// Runs of one job id: a finished job id that starts again is its next run, and
// the finished run stays visible (GetJob with a run, ListJobs with past runs),
// bounded, across a coordinator restart.

#include <vector>

#include "coordinator/rendezvous/job_registry.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "coordinator/rendezvous/registry_test_util.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using testing::Exit;
using testing::NcclId;
using testing::Settings;

class JobRunsTest : public ::testing::Test {
 protected:
  explicit JobRunsTest(int max_past_runs = 16) { options_.limits.max_past_runs = max_past_runs; }

  std::unique_ptr<JobRegistry> NewRegistry() {
    return std::make_unique<JobRegistry>(clock_, &store_, options_);
  }
  // One run of job "j" with node "a" (incarnation `incarnation`) to the end:
  // SUCCEEDED, or FAILED when `fail`.
  void RunToTheEnd(JobRegistry& registry, Incarnation incarnation, bool fail = false) {
    RegisterRequest r;
    r.job_id = "j";
    r.node_id = "a";
    r.incarnation = incarnation;
    r.address = "a.host";
    r.settings = Settings(1, 1, /*max_restarts=*/0);
    ASSERT_TRUE(registry.Register(r).ok());
    const Generation generation = registry.GetJobIncludingPending("j")->generation();
    const NodeRef ref{"j", "a", incarnation, generation};
    ASSERT_TRUE(registry.ReportMasterInfo(ref, NewMasterInfo("", 29500, NcclId())).ok());
    if (fail) {  // no budget: every worker is stopped, then the job fails
      ASSERT_TRUE(registry.WorkerExited(ref, Exit(0, 3, 0, "", clock_.Now())).ok());
      ASSERT_TRUE(registry.WorkersStopped(ref).ok());
    } else {
      for (int rank = 0; rank < 2; ++rank) {
        ASSERT_TRUE(registry.WorkerExited(ref, Exit(rank, 0, 0, "", clock_.Now())).ok());
      }
    }
    ASSERT_TRUE(registry.PersistPending().ok());
    clock_.Advance(absl::Seconds(1));
  }
  std::vector<int> Runs(const std::vector<v1::Job>& jobs) {
    std::vector<int> runs;
    for (const v1::Job& job : jobs) runs.push_back(job.run());
    return runs;
  }

  FakeClock clock_;
  InMemoryJobStateStore store_;
  JobRegistryOptions options_;
};

TEST_F(JobRunsTest, FinishedIdStartsAgain_NextRunCurrentPastRunVisible) {
  std::unique_ptr<JobRegistry> registry = NewRegistry();
  RunToTheEnd(*registry, 1, /*fail=*/true);
  const int64_t first_finished = registry->GetJob("j", false)->finished_unix_ms();
  EXPECT_NE(first_finished, 0);
  RunToTheEnd(*registry, 2);

  absl::StatusOr<v1::Job> current = registry->GetJob("j", false);
  ASSERT_TRUE(current.ok()) << current.status();
  EXPECT_EQ(current->run(), 2);
  EXPECT_EQ(current->state(), v1::SUCCEEDED);
  absl::StatusOr<v1::Job> past = registry->GetJob("j", false, 1);
  ASSERT_TRUE(past.ok()) << past.status();
  EXPECT_EQ(past->run(), 1);
  EXPECT_EQ(past->state(), v1::FAILED);
  ASSERT_TRUE(past->has_root_cause());
  EXPECT_EQ(past->root_cause().exit_code(), 3);
  EXPECT_EQ(past->finished_unix_ms(), first_finished);
  EXPECT_EQ(registry->GetJob("j", false, 2)->run(), 2);  // the current run by number

  EXPECT_EQ(Runs(*registry->ListJobs()), std::vector<int>{2});
  EXPECT_EQ(Runs(*registry->ListJobs(/*include_past_runs=*/true)), (std::vector<int>{2, 1}));
  absl::StatusOr<v1::Job> missing = registry->GetJob("j", false, 7);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("runs kept: 1..1 (past) and 2 (current)"),
            std::string::npos)
      << missing.status();

  // A coordinator restart keeps both.
  registry = NewRegistry();
  ASSERT_TRUE(registry->Restore().ok());
  EXPECT_EQ(registry->GetJob("j", false)->run(), 2);
  EXPECT_EQ(registry->GetJob("j", false, 1)->state(), v1::FAILED);
  EXPECT_EQ(Runs(*registry->ListJobs(true)), (std::vector<int>{2, 1}));
}

// What a past run shows (root cause, failure history, finish message) is what
// it showed when it was the current run, and a restart keeps it.
TEST_F(JobRunsTest, PastRun_KeepsRootCauseAndFailures_AcrossRestart) {
  std::unique_ptr<JobRegistry> registry = NewRegistry();
  RunToTheEnd(*registry, 1, /*fail=*/true);
  const v1::Job finished = *registry->GetJob("j", false);
  ASSERT_EQ(finished.failures_size(), 1u);
  ASSERT_TRUE(finished.has_root_cause());
  RunToTheEnd(*registry, 2);
  auto expect_as_finished = [&](const v1::Job& past) {
    EXPECT_EQ(past.state(), v1::FAILED);
    ASSERT_TRUE(past.has_root_cause());
    EXPECT_EQ(past.root_cause().exit_code(), finished.root_cause().exit_code());
    EXPECT_EQ(past.root_cause().node_id(), finished.root_cause().node_id());
    ASSERT_EQ(past.failures_size(), finished.failures_size());
    EXPECT_EQ(past.failures(0).exit_code(), 3);
    EXPECT_EQ(past.failures(0).time_unix_ms(), finished.failures(0).time_unix_ms());
    EXPECT_EQ(past.message(), finished.message());
    EXPECT_EQ(past.restart_count(), finished.restart_count());
    EXPECT_EQ(past.last_event_index(), finished.last_event_index());
  };
  expect_as_finished(*registry->GetJob("j", false, 1));
  registry = NewRegistry();
  ASSERT_TRUE(registry->Restore().ok());
  expect_as_finished(*registry->GetJob("j", false, 1));
  const std::vector<v1::Job> all = *registry->ListJobs(/*include_past_runs=*/true);
  ASSERT_EQ(all.size(), 2u);
  expect_as_finished(all[1]);
}

class BoundedJobRunsTest : public JobRunsTest {
 protected:
  BoundedJobRunsTest() : JobRunsTest(/*max_past_runs=*/2) {}
};

TEST_F(BoundedJobRunsTest, OnlyTheNewestPastRunsAreKept) {
  std::unique_ptr<JobRegistry> registry = NewRegistry();
  for (Incarnation incarnation = 1; incarnation <= 5; ++incarnation) {
    RunToTheEnd(*registry, incarnation);
  }
  EXPECT_EQ(Runs(*registry->ListJobs(true)), (std::vector<int>{5, 3, 4}));
  EXPECT_EQ(registry->GetJob("j", false, 2).status().code(), absl::StatusCode::kNotFound);
  registry = NewRegistry();
  ASSERT_TRUE(registry->Restore().ok());
  EXPECT_EQ(Runs(*registry->ListJobs(true)), (std::vector<int>{5, 3, 4}));
}

TEST_F(JobRunsTest, RerunByAnAgent_KeepsTheJobsToken) {
  std::unique_ptr<JobRegistry> registry = NewRegistry();
  const absl::StatusOr<v1::Job> created = testing::WhileWriting(
      *registry, [&] { return registry->CreateJob("j", Settings(1, 1, 0), std::string(64, 'f')); });
  ASSERT_TRUE(created.ok()) << created.status();
  RunToTheEnd(*registry, 1);
  RunToTheEnd(*registry, 2);  // an agent starts run 2 (then 3)
  EXPECT_EQ(registry->JobTokenHashes(),
            (std::vector<std::pair<std::string, std::string>>{{"j", std::string(64, 'f')}}));
  registry = NewRegistry();
  ASSERT_TRUE(registry->Restore().ok());
  EXPECT_EQ(registry->JobTokenHashes().size(), 1u);
}

TEST_F(JobRunsTest, RefusedFirstRegistrationOfANewRun_FinishedRunStays) {
  std::unique_ptr<JobRegistry> registry = NewRegistry();
  RunToTheEnd(*registry, 1);
  RegisterRequest bad;
  bad.job_id = "j";
  bad.node_id = "a";
  bad.incarnation = 2;
  bad.nproc = 100000;  // beyond the limit
  bad.settings = Settings(1, 1);
  EXPECT_EQ(registry->Register(bad).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry->PersistPending().ok());
  EXPECT_EQ(registry->GetJob("j", false)->run(), 1);
  EXPECT_EQ(registry->GetJob("j", false)->state(), v1::SUCCEEDED);
  EXPECT_EQ(Runs(*registry->ListJobs(true)), std::vector<int>{1});
}

TEST_F(JobRunsTest, RemoveJob_ForgetsEveryRun) {
  std::unique_ptr<JobRegistry> registry = NewRegistry();
  RunToTheEnd(*registry, 1);
  RunToTheEnd(*registry, 2);
  const absl::Status removed =
      testing::WhileWriting(*registry, [&] { return registry->RemoveJob("j"); });
  ASSERT_TRUE(removed.ok()) << removed;
  RunToTheEnd(*registry, 3);
  EXPECT_EQ(Runs(*registry->ListJobs(true)), std::vector<int>{1});
  registry = NewRegistry();
  ASSERT_TRUE(registry->Restore().ok());
  EXPECT_EQ(Runs(*registry->ListJobs(true)), std::vector<int>{1});
}

}  // namespace
}  // namespace ddp::rendezvous
