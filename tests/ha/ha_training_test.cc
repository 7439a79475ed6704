// A 2-node PyTorch (gloo) job through three coordinators on a 3-member etcd
// cluster (issues 12, 22): kill -9 or SIGSTOP of the leading coordinator
// mid-training costs no worker restart, with the job's default settings. The
// agents' leases run out during the failover: they freeze their workers,
// resume their sessions with the new leader (which gives every node a full
// heartbeat timeout from when it serves), and thaw them; the same worker
// processes finish, TORCHELASTIC_RESTART_COUNT stays 0.

#include <signal.h>

#include "tests/e2e/training_fixture.h"
#include "tests/ha/ha_cluster.h"

namespace ddp::testing {
namespace {

class HaTrainingTest : public TrainingE2eTest {
 protected:
  void SetUp() override {
    TrainingE2eTest::SetUp();
    if (IsSkipped()) return;
    if (!EtcdInstalled()) GTEST_SKIP() << kEtcdBinary << " is not installed (tools/setup.sh)";
    auto etcd = EtcdCluster::Start(Path("etcd-cluster"));
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    group_ = std::make_unique<CoordinatorGroup>(dir_, etcd_->Store("train-ha"), 3);
    ASSERT_TRUE(group_->StartAll().ok());
    ASSERT_GE(group_->WaitForLeader(absl::Seconds(15)), 0);
    coordinator_target_ = group_->Targets();
  }

  void TearDown() override {
    agents_.clear();
    group_.reset();
    etcd_.reset();
    TrainingE2eTest::TearDown();
  }

  void FailoverKeepsTheWorkers(int signal) {
    rdzv_conf_ = "last_call_timeout=1,join_timeout=60";  // the job's lease settings
    const std::vector<std::string> launch = {"--nnodes", "2"};
    AgentProcess& a = StartAgent("node-a", launch, Train(60, "0.25"));
    AgentProcess& b = StartAgent("node-b", launch, Train(60, "0.25"));
    ASSERT_TRUE(BothTrainingInOneWorld(a, b)) << Logs();
    ASSERT_FALSE(AnyResult()) << "training ended before the failover";
    const std::set<pid_t> workers_a = ProcessesOf(a), workers_b = ProcessesOf(b);
    const int leader = group_->WaitForLeader(absl::Seconds(5));
    ASSERT_GE(leader, 0);
    const pid_t leader_pid = group_->at(leader).pid();
    if (signal == SIGKILL) {
      group_->at(leader).Kill9();
    } else {
      ASSERT_EQ(kill(leader_pid, SIGSTOP), 0);
    }
    const int next = group_->WaitForLeader(absl::Seconds(15), leader);
    ASSERT_GE(next, 0) << "no coordinator took over";
    ASSERT_NE(next, leader);
    // Both agents resumed with the new leader while their workers lived on.
    ASSERT_TRUE(PollUntil(
        [&] {
          return CountOf(a.log(), "session resumed") >= 1 &&
                 CountOf(b.log(), "session resumed") >= 1;
        },
        kBound))
        << Logs();
    if (signal == SIGSTOP) {
      // The paused leader, let go: it finds its leadership gone and exits 5
      // without renewing anyone's lease.
      ASSERT_EQ(kill(leader_pid, SIGCONT), 0);
      ASSERT_TRUE(PollUntil([&] { return group_->at(leader).ExitedWith().has_value(); }, kBound));
      EXPECT_EQ(group_->at(leader).ExitedWith().value_or(5), 5);
    }
    if (!AnyResult()) {
      for (pid_t pid : workers_a) EXPECT_TRUE(ProcessesOf(a).count(pid)) << "worker " << pid;
      for (pid_t pid : workers_b) EXPECT_TRUE(ProcessesOf(b).count(pid)) << "worker " << pid;
    }
    EXPECT_EQ(a.Wait(kBound), 0) << Logs();
    EXPECT_EQ(b.Wait(kBound), 0) << Logs();
    ExpectEveryRankStartedOnce(4);
  }

  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<CoordinatorGroup> group_;
};

// Kills (kill -9) or pauses (SIGSTOP) the leading coordinator while both
// agents train, with the job's default settings (heartbeat_timeout 3 s, a 2 s
// lease: shorter than a failover, so the workers freeze and thaw); a standby
// takes over, the agents move to it, the same workers finish.
TEST_F(HaTrainingTest, LeaderKilled9DuringTraining_DefaultSettings_SameWorkersFinish) {
  FailoverKeepsTheWorkers(SIGKILL);
}

TEST_F(HaTrainingTest, LeaderPausedDuringTraining_DefaultSettings_SameWorkersFinish) {
  FailoverKeepsTheWorkers(SIGSTOP);
}

// docs/operations.md, "Upgrading the coordinator", HA: one coordinator at a
// time, the standbys first, the leader last (SIGTERM resigns), each replaced
// by another binary and started again; the job trains on with the default
// settings and no worker restarts.
TEST_F(HaTrainingTest, RollingUpgrade_OneCoordinatorAtATime_NoWorkerRestart) {
  rdzv_conf_ = "last_call_timeout=1,join_timeout=60";
  AgentProcess& a = StartAgent("node-a", {"--nnodes", "2"}, Train(80, "0.25"));
  AgentProcess& b = StartAgent("node-b", {"--nnodes", "2"}, Train(80, "0.25"));
  ASSERT_TRUE(BothTrainingInOneWorld(a, b)) << Logs();
  const std::string upgraded = Path("coordinator-next");
  ASSERT_EQ(RunShell(absl::StrCat("cp ", Runfile("coordinator/coordinator"), " ", upgraded))
                .exit_code,
            0);
  const int leader = group_->WaitForLeader(absl::Seconds(5));
  ASSERT_GE(leader, 0);
  std::vector<int> order;
  for (int i = 0; i < group_->size(); ++i) {
    if (i != leader) order.push_back(i);
  }
  order.push_back(leader);
  for (int i : order) {
    EXPECT_EQ(group_->at(i).Terminate(), 0) << "coordinator " << i;
    group_->at(i).set_binary(upgraded);
    ASSERT_TRUE(group_->at(i).Start().ok()) << "coordinator " << i;
    ASSERT_GE(group_->WaitForLeader(absl::Seconds(15)), 0) << "no leader after upgrading " << i;
  }
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  ExpectEveryRankStartedOnce(4);
}

}  // namespace
}  // namespace ddp::testing
