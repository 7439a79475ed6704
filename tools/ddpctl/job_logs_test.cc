#include "tools/ddpctl/job_logs.h"

#include "gtest/gtest.h"

namespace ddp::ddpctl {
namespace {

v1::Failure Failed(int64_t generation, int64_t rank, const std::string& traceback) {
  v1::Failure f;
  f.set_node_id("node-a");
  f.set_generation(generation);
  f.set_local_rank(0);
  f.set_global_rank(rank);
  f.set_exit_code(1);
  f.set_traceback(traceback);
  f.set_stderr_tail("step 1\n" + traceback + "\n");
  f.set_log_path("/tmp/run/attempt_1/0/stderr.log");
  return f;
}

v1::Job TwoFailures() {
  v1::Job job;
  job.set_job_id("j1");
  *job.add_failures() = Failed(1, 0, "Traceback (most recent call last):\nValueError: first");
  *job.add_failures() = Failed(2, 1, "Traceback (most recent call last):\nValueError: second");
  *job.mutable_root_cause() = job.failures(1);
  return job;
}

TEST(SelectFailureLogs, NoFilter_RootCause) {
  absl::StatusOr<std::vector<v1::Failure>> got = SelectFailureLogs(TwoFailures(), {});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].generation(), 2);
}

TEST(SelectFailureLogs, RankAndGeneration_Match) {
  absl::StatusOr<std::vector<v1::Failure>> got = SelectFailureLogs(TwoFailures(), {0, 1});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].global_rank(), 0);
}

TEST(SelectFailureLogs, NothingMatches_NotFoundNamesTheFilter) {
  absl::StatusOr<std::vector<v1::Failure>> got = SelectFailureLogs(TwoFailures(), {7, 3});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("rank 7 in generation 3"), std::string::npos)
      << got.status();
}

TEST(FailureLogsText, Failure_LogsTracebackAndTail) {
  const std::string text = FailureLogsText({TwoFailures().failures(0)});
  EXPECT_NE(text.find("logs: node-a:/tmp/run/attempt_1/0/stderr.log\n"), std::string::npos) << text;
  EXPECT_NE(text.find("traceback:\n  Traceback (most recent call last):\n  ValueError: first\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("stderr (last lines):\n  step 1\n"), std::string::npos) << text;
}

TEST(FailureLogsText, NoOutput_SaysSo) {
  v1::Failure f;
  f.set_node_id("n");
  f.set_local_rank(0);
  const std::string text = FailureLogsText({f});
  EXPECT_NE(text.find("logs: none recorded\n"), std::string::npos) << text;
  EXPECT_NE(text.find("traceback: none\n"), std::string::npos) << text;
  EXPECT_NE(text.find("stderr (last lines): none kept\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace ddp::ddpctl
