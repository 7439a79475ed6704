// A failure carries the worker's own words (stderr tail, traceback, log path)
// from the agent's report to the job's failures, within RendezvousLimits.

#include "absl/strings/str_cat.h"
#include "coordinator/rendezvous/job.h"
#include "coordinator/rendezvous/job_test_util.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using testing::Exit;
using testing::JobHarness;
using testing::Settings;
using testing::StartRunning;

WorkerExit WithOutput(int local_rank, const std::string& tail, const std::string& traceback,
                      const std::string& log_path) {
  WorkerExit exit = Exit(local_rank, 1, 0, "exit code 1", absl::UnixEpoch());
  exit.set_stderr_tail(tail);
  exit.set_traceback(traceback);
  exit.set_log_path(log_path);
  return exit;
}

TEST(JobWorkerOutput, WorkerExited_TailTracebackAndLog_InFailuresAndRootCause) {
  JobHarness h(Settings(1, 1, /*max_restarts=*/0));
  StartRunning(h, {"a"});
  ASSERT_TRUE(h.job()
                  .WorkerExited(h.Ref("a"), WithOutput(0, "step 3\nValueError: bad batch\n",
                                                       "Traceback ...\nValueError: bad batch",
                                                       "/tmp/run/attempt_1/0/stderr.log"))
                  .ok());
  const v1::Job status = h.job().Status(false);
  ASSERT_EQ(status.failures_size(), 1u);
  EXPECT_EQ(status.failures(0).stderr_tail(), "step 3\nValueError: bad batch\n");
  EXPECT_EQ(status.failures(0).traceback(), "Traceback ...\nValueError: bad batch");
  EXPECT_EQ(status.failures(0).log_path(), "/tmp/run/attempt_1/0/stderr.log");
  ASSERT_TRUE(status.has_root_cause());
  EXPECT_EQ(status.root_cause().traceback(), "Traceback ...\nValueError: bad batch");
  // Events stay small: no worker output in them.
  for (const JobEvent& event : h.outbox().events) {
    if (event.has_failure()) {
      EXPECT_TRUE(event.failure().stderr_tail().empty());
      EXPECT_TRUE(event.failure().traceback().empty());
    }
  }
}

TEST(JobWorkerOutput, WorkerExited_OverLimits_KeepsTheEnd) {
  RendezvousLimits limits;
  limits.max_stderr_tail_bytes = 8;
  limits.max_traceback_bytes = 5;
  limits.max_log_path_length = 4;
  JobHarness h(Settings(1, 1, 0), limits);
  StartRunning(h, {"a"});
  ASSERT_TRUE(
      h.job().WorkerExited(h.Ref("a"), WithOutput(0, "0123456789", "Error: x", "/tmp/x")).ok());
  const v1::Job status = h.job().Status(false);
  const FailureInfo& f = status.failures().at(0);
  EXPECT_EQ(f.stderr_tail(), "23456789");
  EXPECT_EQ(f.traceback(), "or: x");
  EXPECT_EQ(f.log_path(), "/tmp");
}

// The cut keeps whole UTF-8 sequences: the failure is a proto3 record (an
// invalid string would not parse back from storage).
TEST(JobWorkerOutput, WorkerExited_OverLimitsInsideACharacter_CutBetweenCharacters) {
  RendezvousLimits limits;
  limits.max_stderr_tail_bytes = 4;  // would begin inside the e-acute
  limits.max_traceback_bytes = 4;
  limits.max_log_path_length = 2;  // would end inside the euro sign
  JobHarness h(Settings(1, 1, 0), limits);
  StartRunning(h, {"a"});
  ASSERT_TRUE(
      h.job()
          .WorkerExited(h.Ref("a"), WithOutput(0, "x\xc3\xa9\xe2\x82\xac", "ok", "/\xe2\x82\xac"))
          .ok());
  const v1::Job status = h.job().Status(false);
  const FailureInfo& f = status.failures().at(0);
  EXPECT_EQ(f.stderr_tail(), "\xe2\x82\xac");
  EXPECT_EQ(f.traceback(), "ok");
  EXPECT_EQ(f.log_path(), "/");
}

TEST(JobWorkerOutput, ManyFailures_OnlyTheNewestKeepTheirOutput) {
  RendezvousLimits limits;
  limits.max_failures_with_logs = 2;
  JobHarness h(Settings(1, 1, /*max_restarts=*/5), limits);
  StartRunning(h, {"a"});
  for (int i = 0; i < 4; ++i) {
    // Beyond the crash-loop window: each failure is an ordinary restart.
    h.clock().Advance(absl::Seconds(30));
    ASSERT_TRUE(h.job()
                    .WorkerExited(h.Ref("a"), WithOutput(0, absl::StrCat("tail ", i),
                                                         absl::StrCat("tb ", i), "/log"))
                    .ok());
    if (i < 3) {
      ASSERT_TRUE(h.job().WorkersStopped(h.Ref("a")).ok());
      ASSERT_TRUE(h.AnswerMasterInfo().ok());
      h.ClearOutbox();
    }
  }
  const v1::Job status = h.job().Status(false);
  const std::vector<FailureInfo> failures(status.failures().begin(), status.failures().end());
  ASSERT_EQ(failures.size(), 4u);
  EXPECT_EQ(failures[0].stderr_tail(), "");
  EXPECT_EQ(failures[1].traceback(), "");
  EXPECT_EQ(failures[1].log_path(), "/log");  // small: always kept
  EXPECT_EQ(failures[2].stderr_tail(), "tail 2");
  EXPECT_EQ(failures[3].traceback(), "tb 3");
}

TEST(JobWorkerOutput, RecordRoundTrip_KeepsOutput) {
  JobHarness h(Settings(1, 1, 0));
  StartRunning(h, {"a"});
  ASSERT_TRUE(h.job().WorkerExited(h.Ref("a"), WithOutput(0, "tail", "tb", "/log")).ok());
  const JobRecord record = h.job().Record();
  ASSERT_EQ(record.failure_history_size(), 1);
  EXPECT_EQ(record.failure_history(0).stderr_tail(), "tail");
  ASSERT_TRUE(record.has_cause());
  EXPECT_EQ(record.cause().traceback(), "tb");
  EXPECT_EQ(record.cause().log_path(), "/log");
}

}  // namespace
}  // namespace ddp::rendezvous
