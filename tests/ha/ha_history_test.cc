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
  absl::StatusOr<SeenHistory> before =
      SeeHistory(address, absl::StrCat(dir, "/c", leader, "/http.port"), kJob, kTimeout);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->job.generation(), 2);
  ASSERT_EQ(before->job.restart_count(), 1);
  ASSERT_EQ(before->job.failures_size(), 1);
  EXPECT_THAT(before->counters,
              ::testing::Contains("ddp_restarts_total{cause=\"worker_failure\"} 1"));

  group.at(leader).Kill9();
  const int next = group.WaitForLeader(kElection, /*other_than=*/leader);
  ASSERT_GE(next, 0) << "no coordinator took over";
  absl::StatusOr<SeenHistory> after = SeeHistory(
      group.at(next).address(), absl::StrCat(dir, "/c", next, "/http.port"), kJob, kTimeout);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(HistoryDifferences(*before, *after), ::testing::IsEmpty());
}

}  // namespace
}  // namespace ddp::testing
