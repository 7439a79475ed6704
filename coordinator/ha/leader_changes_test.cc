#include "coordinator/ha/leader_changes.h"

#include "gtest/gtest.h"

namespace ddp::ha {
namespace {

v1::CoordinatorInfo Leader(const std::string& name) {
  v1::CoordinatorInfo info;
  info.set_name(name);
  info.set_grpc_address("c1:29400");
  return info;
}

TEST(LeaderChanges, FirstLeader_Counts) {
  LeaderChanges changes;
  EXPECT_EQ(changes.count(), 0);
  EXPECT_TRUE(changes.Observe(Leader("c1/100")));
  EXPECT_EQ(changes.count(), 1);
}

TEST(LeaderChanges, SameLeaderAgainOrNone_NoChange) {
  LeaderChanges changes;
  changes.Observe(Leader("c1/100"));
  EXPECT_FALSE(changes.Observe(Leader("c1/100")));
  EXPECT_FALSE(changes.Observe(v1::CoordinatorInfo()));  // key deleted: none elected
  EXPECT_FALSE(changes.Observe(Leader("c1/100")));       // re-elected with no one between
  EXPECT_EQ(changes.count(), 1);
}

TEST(LeaderChanges, AnotherThenBack_EachCounts) {
  LeaderChanges changes;
  changes.Observe(Leader("c1/100"));
  EXPECT_TRUE(changes.Observe(Leader("c2/200")));
  EXPECT_TRUE(changes.Observe(Leader("c1/100")));
  // Restarted at the same address: another process, another leader.
  EXPECT_TRUE(changes.Observe(Leader("c1/101")));
  EXPECT_EQ(changes.count(), 4);
}

}  // namespace
}  // namespace ddp::ha
