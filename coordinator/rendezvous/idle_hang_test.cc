#include "coordinator/rendezvous/idle_hang.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

WorkerActivity Idle(int local_rank, absl::Time since) { return {local_rank, true, since}; }
WorkerActivity Active(int local_rank) { return {local_rank, true, std::nullopt}; }

TEST(NodeIdleness, EveryRunningWorkerIdle_AllIdleSinceIsTheLatest) {
  NodeIdleness node;
  node.Update({Idle(1, kT0 + absl::Seconds(2)), Idle(0, kT0)});
  EXPECT_EQ(node.AllIdleSince(), kT0 + absl::Seconds(2));
}

TEST(NodeIdleness, OneWorkerActive_NotIdle) {
  NodeIdleness node;
  node.Update({Idle(0, kT0), Active(1)});
  EXPECT_EQ(node.AllIdleSince(), std::nullopt);
}

TEST(NodeIdleness, ExitedWorkersLeftOut_NoneRunningIsNotIdle) {
  NodeIdleness node;
  node.Update({Idle(0, kT0), {1, /*running=*/false, std::nullopt}});
  EXPECT_EQ(node.AllIdleSince(), kT0);
  node.Update({{0, false, std::nullopt}, {1, false, std::nullopt}});
  EXPECT_EQ(node.AllIdleSince(), std::nullopt);
}

TEST(NodeIdleness, StillIdleReportedAgain_KeepsTheEarlierDate) {
  NodeIdleness node;
  node.Update({Idle(0, kT0), Active(1)});
  // A later heartbeat repeats worker 0's first idle_ms: dated later now.
  node.Update({Idle(0, kT0 + absl::Seconds(5)), Idle(1, kT0 + absl::Seconds(6))});
  EXPECT_EQ(node.workers()[0].idle_since, kT0);
  EXPECT_EQ(node.AllIdleSince(), kT0 + absl::Seconds(6));
}

TEST(NodeIdleness, ActiveInBetween_NewIdleStartsAfresh) {
  NodeIdleness node;
  node.Update({Idle(0, kT0)});
  node.Update({Active(0)});
  node.Update({Idle(0, kT0 + absl::Seconds(9))});
  EXPECT_EQ(node.AllIdleSince(), kT0 + absl::Seconds(9));
  node.Reset();
  EXPECT_EQ(node.AllIdleSince(), std::nullopt);
}

TEST(FindIdleHang, EveryMemberIdleLongerThanTimeout_NamesTheFirstIdle) {
  NodeIdleness a, b;
  a.Update({Idle(0, kT0 + absl::Seconds(1)), Idle(1, kT0)});
  b.Update({Idle(0, kT0 + absl::Seconds(1)), Idle(1, kT0 + absl::Seconds(2))});
  const std::vector<MemberIdleness> members = {{"a", 0, &a}, {"b", 2, &b}};
  EXPECT_EQ(FindIdleHang(members, absl::Seconds(10), kT0 + absl::Seconds(12)), std::nullopt);
  std::optional<IdleHang> hang =
      FindIdleHang(members, absl::Seconds(10), kT0 + absl::Seconds(12) + absl::Milliseconds(1));
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->node_id, "a");
  EXPECT_EQ(hang->local_rank, 1);
  EXPECT_EQ(hang->global_rank, 1);
  EXPECT_EQ(hang->idle_since, kT0);
  EXPECT_EQ(hang->all_idle_since, kT0 + absl::Seconds(2));
  EXPECT_EQ(DescribeIdleHang(*hang, kT0 + absl::Seconds(13)),
            "hang: no CPU or I/O for 11.0 s on any rank of the job; rank 1 (node 'a') stopped "
            "first, 13.0 s ago");
}

// Node b waited in a barrier while rank 0 saved a checkpoint alone; then
// rank 0 stopped: rank 0 is what the job waits for, not b's ranks.
TEST(FindIdleHang, OthersWaitedLongBefore_NamesTheLastToStop) {
  NodeIdleness a, b;
  a.Update({Idle(0, kT0 + absl::Seconds(60)), Idle(1, kT0)});
  b.Update({Idle(0, kT0), Idle(1, kT0)});
  std::optional<IdleHang> hang =
      FindIdleHang({{"a", 0, &a}, {"b", 2, &b}}, absl::Seconds(10), kT0 + absl::Seconds(71));
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->global_rank, 0);
  EXPECT_EQ(hang->idle_since, kT0 + absl::Seconds(60));
}

TEST(FindIdleHang, TieWithinOneSample_LowestGlobalRank) {
  NodeIdleness a, b;
  a.Update({Idle(0, kT0), Idle(1, kT0)});
  b.Update({Idle(0, kT0), Idle(1, kT0)});
  std::optional<IdleHang> hang =
      FindIdleHang({{"b", 2, &b}, {"a", 0, &a}}, absl::Seconds(10), kT0 + absl::Seconds(11));
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->global_rank, 0);
  EXPECT_EQ(hang->node_id, "a");
}

// Rank 0 saves a checkpoint alone while node b waits in a barrier: no hang.
TEST(FindIdleHang, OneMemberActive_NoHang) {
  NodeIdleness a, b;
  a.Update({Active(0), Idle(1, kT0)});
  b.Update({Idle(0, kT0), Idle(1, kT0)});
  EXPECT_EQ(FindIdleHang({{"a", 0, &a}, {"b", 2, &b}}, absl::Seconds(10), kT0 + absl::Hours(1)),
            std::nullopt);
}

TEST(FindIdleHang, MemberWithoutReport_NoHang) {
  NodeIdleness a, b;
  a.Update({Idle(0, kT0)});
  EXPECT_EQ(FindIdleHang({{"a", 0, &a}, {"b", 1, &b}}, absl::Seconds(10), kT0 + absl::Hours(1)),
            std::nullopt);
}

TEST(FindIdleHang, TimeoutZero_RuleOff) {
  NodeIdleness a;
  a.Update({Idle(0, kT0)});
  EXPECT_EQ(FindIdleHang({{"a", 0, &a}}, absl::ZeroDuration(), kT0 + absl::Hours(1)), std::nullopt);
  EXPECT_EQ(FindIdleHang({}, absl::Seconds(10), kT0 + absl::Hours(1)), std::nullopt);
}

}  // namespace
}  // namespace ddp::rendezvous
