// A 2-node PyTorch (gloo) job through three coordinators on a 3-member etcd
// cluster (issue 12): kill -9 of the leading coordinator mid-training costs
// no worker restart. The agents, given every coordinator, resume their
// sessions with the new leader within the job's lease; the same worker
// processes finish, TORCHELASTIC_RESTART_COUNT stays 0.

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

  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<CoordinatorGroup> group_;
};

TEST_F(HaTrainingTest, LeaderKilled9DuringTraining_SameWorkersFinish_NoRestart) {
  // The agents' lease (2/3 of heartbeat_timeout: 10 s) outlasts a failover
  // (the 2 s leader lease and an election) with room for a loaded machine.
  const std::vector<std::string> launch = {"--nnodes", "2", "--rdzv-conf", "heartbeat_timeout=15"};
  AgentProcess& a = StartAgent("node-a", launch, Train(32, "0.25"));
  AgentProcess& b = StartAgent("node-b", launch, Train(32, "0.25"));
  ASSERT_TRUE(BothTrainingInOneWorld(a, b)) << Logs();
  ASSERT_FALSE(AnyResult()) << "training ended before the kill";
  const std::set<pid_t> workers_a = ProcessesOf(a), workers_b = ProcessesOf(b);
  const int leader = group_->WaitForLeader(absl::Seconds(5));
  ASSERT_GE(leader, 0);
  group_->at(leader).Kill9();
  const int next = group_->WaitForLeader(absl::Seconds(15));
  ASSERT_GE(next, 0) << "no coordinator took over";
  ASSERT_NE(next, leader);
  // Both agents resumed with the new leader while their workers ran on.
  ASSERT_TRUE(PollUntil(
      [&] {
        return CountOf(a.log(), "session resumed") >= 1 && CountOf(b.log(), "session resumed") >= 1;
      },
      kBound))
      << Logs();
  if (!AnyResult()) {
    for (pid_t pid : workers_a) EXPECT_TRUE(ProcessesOf(a).count(pid)) << "worker " << pid;
    for (pid_t pid : workers_b) EXPECT_TRUE(ProcessesOf(b).count(pid)) << "worker " << pid;
  }
  EXPECT_EQ(a.Wait(kBound), 0) << Logs();
  EXPECT_EQ(b.Wait(kBound), 0) << Logs();
  ExpectEveryRankStartedOnce(4);
}

}  // namespace
}  // namespace ddp::testing
