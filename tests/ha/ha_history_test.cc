// Issue 22, "history survives", across a failover: three real coordinators on
// a real 3-member etcd; a job runs on the leader through a worker failure and
// a group restart; the leader is killed with kill -9. The newly elected
// leader answers WatchJob and the SSE stream from index 1 with exactly the
// events the old one gave, and its /metrics with the same event counters.

#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/crash/job_history_probe.h"
#include "tests/ha/ha_cluster.h"

namespace ddp::testing {
namespace {

constexpr char kJob[] = "ha-history";
constexpr absl::Duration kElection = absl::Seconds(15);
constexpr absl::Duration kTimeout = absl::Seconds(20);

std::vector<std::string> Serialized(const std::vector<v1::JobEvent>& events) {
  std::vector<std::string> out;
  for (const v1::JobEvent& event : events) out.push_back(event.DebugString());
  return out;
}

TEST(HaHistoryTest, LeaderKilled_NewLeaderServesTheSameEventsAndCounters) {
  if (!EtcdInstalled()) GTEST_SKIP() << kEtcdBinary << " is not installed (tools/setup.sh)";
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/ha-history");
  mkdir(dir.c_str(), 0755);
  absl::StatusOr<std::unique_ptr<EtcdCluster>> etcd = EtcdCluster::Start(dir);
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  CoordinatorGroup group(
      dir, (*etcd)->Store("history"), 3, {}, [](CoordinatorProcessOptions& options) {
        options.extra_args.insert(
            options.extra_args.end(),
            {"--http-port", "-1", "--http-port-file", options.work_dir + "/http.port"});
      });
  ASSERT_TRUE(group.StartAll().ok());
  const int leader = group.WaitForLeader(kElection);
  ASSERT_GE(leader, 0) << "no coordinator was elected";
  const std::string address = group.at(leader).address();

  RestartedJob job(address, kJob);
  absl::Status ran = job.Run(kTimeout);
  ASSERT_TRUE(ran.ok()) << ran;
  absl::StatusOr<v1::Job> before = GetJobWhenServing(address, kJob, kTimeout);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->generation(), 2);
  const int64_t last = before->last_event_index();
  absl::StatusOr<std::vector<v1::JobEvent>> watched =
      WatchJobEvents(address, kJob, 1, last, kTimeout);
  ASSERT_TRUE(watched.ok()) << watched.status();
  absl::StatusOr<int> http_port =
      ReadPortFile(absl::StrCat(dir, "/c", leader, "/http.port"), kTimeout);
  ASSERT_TRUE(http_port.ok()) << http_port.status();
  absl::StatusOr<std::vector<std::string>> sse =
      SseEventData(*http_port, kJob, 1, static_cast<size_t>(last), kTimeout);
  ASSERT_TRUE(sse.ok()) << sse.status();
  absl::StatusOr<std::vector<std::string>> counters = EventCounterSamples(*http_port);
  ASSERT_TRUE(counters.ok()) << counters.status();
  EXPECT_THAT(*counters, ::testing::Contains("ddp_restarts_total{cause=\"worker_failure\"} 1"));

  group.at(leader).Kill9();
  const int next = group.WaitForLeader(kElection, /*other_than=*/leader);
  ASSERT_GE(next, 0) << "no coordinator took over";
  const std::string next_address = group.at(next).address();
  absl::StatusOr<v1::Job> after = GetJobWhenServing(next_address, kJob, kTimeout);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->first_event_index(), 1);
  EXPECT_EQ(after->last_event_index(), last);
  EXPECT_EQ(after->restart_count(), 1);
  ASSERT_EQ(after->failures_size(), 1);
  EXPECT_EQ(after->failures(0).DebugString(), before->failures(0).DebugString());
  absl::StatusOr<std::vector<v1::JobEvent>> rewatched =
      WatchJobEvents(next_address, kJob, 1, last, kTimeout);
  ASSERT_TRUE(rewatched.ok()) << rewatched.status();
  EXPECT_EQ(Serialized(*rewatched), Serialized(*watched));
  http_port = ReadPortFile(absl::StrCat(dir, "/c", next, "/http.port"), kTimeout);
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
