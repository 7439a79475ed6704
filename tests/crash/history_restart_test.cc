// Issue 22, "history survives", with a real coordinator process: a job's
// events, root-cause failure and restart counters survive a kill -9 and a
// restart on the same data dir. WatchJob (gRPC) and the SSE stream of the
// REST gateway from index 1 return, after the restart, exactly the events
// they returned before it (same indexes, same contents), and a scrape of
// /metrics shows the same event counters (restarts by cause, worker
// failures, node losses, generations opened).

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/crash/coordinator_process.h"
#include "tests/crash/job_history_probe.h"

namespace ddp::testing {
namespace {

constexpr char kJob[] = "history";
constexpr absl::Duration kTimeout = absl::Seconds(20);

TEST(HistoryRestartTest, KillNineAndRestart_WatchSseAndCountersAsBefore) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = tmp != nullptr ? tmp : "/tmp";
  const std::string http_port_file = root + "/http.port";
  CoordinatorProcessOptions options;
  options.binary = CoordinatorBinaryFromRunfiles();
  options.data_dir = root + "/history-data";
  options.work_dir = root;
  options.extra_args = {"--http-port", "-1", "--http-port-file", http_port_file};
  CoordinatorProcess process(options);
  ASSERT_TRUE(process.Start().ok());
  const std::string address = process.address();

  RestartedJob job(address, kJob);
  absl::Status ran = job.Run(kTimeout);
  ASSERT_TRUE(ran.ok()) << ran;
  absl::StatusOr<SeenHistory> before = SeeHistory(address, http_port_file, kJob, kTimeout);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->job.generation(), 2);
  ASSERT_EQ(before->job.restart_count(), 1);
  ASSERT_EQ(before->job.failures_size(), 1);
  const int64_t last = before->job.last_event_index();
  ASSERT_GE(last, 7);  // created, 2 joined, opened, failed, restarting, opened
  ASSERT_EQ(before->watched.size(), static_cast<size_t>(last));
  EXPECT_THAT(before->counters,
              ::testing::Contains("ddp_restarts_total{cause=\"worker_failure\"} 1"));
  EXPECT_THAT(before->counters, ::testing::Contains("ddp_worker_failures_total 1"));
  EXPECT_THAT(before->counters, ::testing::Contains("ddp_generations_opened_total 2"));

  process.Kill9();
  std::remove(http_port_file.c_str());
  ASSERT_TRUE(process.Start().ok());

  absl::StatusOr<SeenHistory> after = SeeHistory(address, http_port_file, kJob, kTimeout);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(HistoryDifferences(*before, *after), ::testing::IsEmpty());
}

}  // namespace
}  // namespace ddp::testing
