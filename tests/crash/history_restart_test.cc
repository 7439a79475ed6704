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

std::vector<std::string> Serialized(const std::vector<v1::JobEvent>& events) {
  std::vector<std::string> out;
  for (const v1::JobEvent& event : events) out.push_back(event.DebugString());
  return out;
}

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
  absl::StatusOr<v1::Job> before = GetJobWhenServing(address, kJob, kTimeout);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->generation(), 2);
  ASSERT_EQ(before->restart_count(), 1);
  const int64_t last = before->last_event_index();
  ASSERT_GE(last, 7);  // created, 2 joined, opened, failed, restarting, opened

  absl::StatusOr<std::vector<v1::JobEvent>> watched =
      WatchJobEvents(address, kJob, 1, last, kTimeout);
  ASSERT_TRUE(watched.ok()) << watched.status();
  ASSERT_EQ(watched->size(), static_cast<size_t>(last));
  absl::StatusOr<int> http_port = ReadPortFile(http_port_file, kTimeout);
  ASSERT_TRUE(http_port.ok()) << http_port.status();
  absl::StatusOr<std::vector<std::string>> sse =
      SseEventData(*http_port, kJob, 1, static_cast<size_t>(last), kTimeout);
  ASSERT_TRUE(sse.ok()) << sse.status();
  absl::StatusOr<std::vector<std::string>> counters = EventCounterSamples(*http_port);
  ASSERT_TRUE(counters.ok()) << counters.status();
  EXPECT_THAT(*counters, ::testing::Contains("ddp_restarts_total{cause=\"worker_failure\"} 1"));
  EXPECT_THAT(*counters, ::testing::Contains("ddp_worker_failures_total 1"));
  EXPECT_THAT(*counters, ::testing::Contains("ddp_generations_opened_total 2"));

  process.Kill9();
  std::remove(http_port_file.c_str());
  ASSERT_TRUE(process.Start().ok());

  absl::StatusOr<v1::Job> after = GetJobWhenServing(address, kJob, kTimeout);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->first_event_index(), 1) << "every event is still kept";
  EXPECT_EQ(after->last_event_index(), last);
  EXPECT_EQ(after->restart_count(), 1);
  ASSERT_EQ(before->failures_size(), 1);
  ASSERT_EQ(after->failures_size(), 1);
  EXPECT_EQ(after->failures(0).DebugString(), before->failures(0).DebugString());

  absl::StatusOr<std::vector<v1::JobEvent>> rewatched =
      WatchJobEvents(address, kJob, 1, last, kTimeout);
  ASSERT_TRUE(rewatched.ok()) << rewatched.status();
  EXPECT_EQ(Serialized(*rewatched), Serialized(*watched));
  http_port = ReadPortFile(http_port_file, kTimeout);
  ASSERT_TRUE(http_port.ok()) << http_port.status();
  absl::StatusOr<std::vector<std::string>> resse =
      SseEventData(*http_port, kJob, 1, static_cast<size_t>(last), kTimeout);
  ASSERT_TRUE(resse.ok()) << resse.status();
  EXPECT_EQ(*resse, *sse);
  absl::StatusOr<std::vector<std::string>> recounters = EventCounterSamples(*http_port);
  ASSERT_TRUE(recounters.ok()) << recounters.status();
  EXPECT_EQ(*recounters, *counters);
}

}  // namespace
}  // namespace ddp::testing
