#include "coordinator/rendezvous/membership.h"

#include "common/clock.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

Membership::Options TestOptions() {
  Membership::Options options;
  options.heartbeat_interval = absl::Seconds(1);
  options.heartbeat_timeout = absl::Seconds(10);
  options.lease = absl::Seconds(8);
  options.max_excluded_nodes = 1;
  return options;
}

RegisterRequest Request(const std::string& node_id, Incarnation incarnation) {
  RegisterRequest request;
  request.job_id = "j";
  request.node_id = node_id;
  request.incarnation = incarnation;
  request.address = node_id + ".local";
  return request;
}

NodeRef Ref(const std::string& node_id, Incarnation incarnation, Generation generation) {
  return NodeRef{"j", node_id, incarnation, generation};
}

class MembershipTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  Membership members_{"j", TestOptions(), clock_, {}, /*next_join_seq=*/1};
};

TEST_F(MembershipTest, Add_AssignsJoinOrderAndRecordsTheChange) {
  members_.Add(Request("a", 1), 2);
  members_.Add(Request("b", 1), 1);
  EXPECT_EQ(members_.size(), 2);
  EXPECT_EQ(members_.Find("a")->record.join_seq(), 1u);
  EXPECT_EQ(members_.Find("b")->record.join_seq(), 2u);
  EXPECT_EQ(members_.next_join_seq(), 3u);
  JobChanges changes;
  members_.TakeChanges(changes);
  EXPECT_EQ(changes.upserted_nodes.size(), 2u);
  EXPECT_FALSE(members_.HasChanges());
  members_.Remove("a");
  members_.TakeChanges(changes);
  EXPECT_EQ(changes.removed_nodes, std::vector<std::string>{"a"});
  EXPECT_EQ(members_.Find("a"), nullptr);
}

TEST_F(MembershipTest, Fence_RefusesUnknownOldIncarnationStaleGenerationAndExcluded) {
  members_.Add(Request("a", 7), 1);
  EXPECT_TRUE(members_.Fence(Ref("a", 7, 3), 3, /*exact_generation=*/true).ok());
  EXPECT_TRUE(members_.Fence(Ref("a", 7, 2), 3, /*exact_generation=*/false).ok());
  EXPECT_EQ(members_.Fence(Ref("a", 7, 2), 3, true).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(members_.Fence(Ref("a", 7, 4), 3, false).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(members_.Fence(Ref("a", 6, 3), 3, true).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(members_.Fence(Ref("z", 1, 3), 3, true).status().code(), absl::StatusCode::kAborted);
  ASSERT_TRUE(members_.Exclude("a").value());
  EXPECT_EQ(members_.Fence(Ref("a", 7, 3), 3, true).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(MembershipTest, ValidateRegistration_RefusesOutOfRangeFieldsAndExcludedNodes) {
  const RendezvousLimits limits;
  EXPECT_TRUE(members_.ValidateRegistration(Request("a", 1), 2, limits).ok());
  EXPECT_EQ(members_.ValidateRegistration(Request("a", 0), 2, limits).code(),
            absl::StatusCode::kInvalidArgument);
  RegisterRequest rank_too_high = Request("a", 1);
  rank_too_high.requested_rank = 2;
  EXPECT_EQ(members_.ValidateRegistration(rank_too_high, 2, limits).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(members_.Exclude("a").value());
  EXPECT_EQ(members_.ValidateRegistration(Request("a", 1), 2, limits).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(MembershipTest, Exclude_SecondTimeIsNoChangeAndTheListIsBounded) {
  EXPECT_TRUE(members_.Exclude("a").value());
  EXPECT_FALSE(members_.Exclude("a").value());
  EXPECT_EQ(members_.Exclude("b").status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(members_.ExcludedSorted(), std::vector<std::string>{"a"});
}

TEST_F(MembershipTest, Alive_OnlyWhileConnectedAndHeartbeating) {
  Membership::Node& a = members_.Add(Request("a", 1), 1);
  EXPECT_TRUE(members_.Alive(a));
  clock_.Advance(absl::Seconds(2));
  EXPECT_FALSE(members_.Alive(a)) << "two heartbeat intervals of silence";
  members_.Heartbeat(a);
  members_.StreamClosed(a);
  EXPECT_FALSE(members_.Alive(a));
}

TEST_F(MembershipTest, LostSince_StreamClosedAtOnceSilentAfterHalfTheLease) {
  Membership::Node& a = members_.Add(Request("a", 1), 1);
  const absl::Time t0 = clock_.Now();
  EXPECT_FALSE(members_.LostSince(a, t0).has_value());
  EXPECT_FALSE(members_.LostSince(a, t0 + absl::Seconds(3)).has_value());
  EXPECT_EQ(members_.LostSince(a, t0 + absl::Seconds(4)), t0) << "half the 8 s lease";
  clock_.Advance(absl::Seconds(1));
  members_.StreamClosed(a);
  EXPECT_EQ(members_.LostSince(a, clock_.Now()), t0 + absl::Seconds(1));
  members_.Resume(a, Request("a", 1));
  EXPECT_FALSE(members_.LostSince(a, clock_.Now()).has_value());
}

TEST_F(MembershipTest, Silent_AfterHeartbeatTimeoutAndServingResumedGivesAFullTimeout) {
  Membership::Node& a = members_.Add(Request("a", 1), 1);
  Membership::Node& b = members_.Add(Request("b", 1), 1);
  clock_.Advance(absl::Seconds(9));
  members_.Heartbeat(b);
  EXPECT_TRUE(members_.Silent(clock_.Now()).empty());
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(members_.Silent(clock_.Now()), std::vector<std::string>{"a"});
  members_.ServingResumed(clock_.Now());
  clock_.Advance(absl::Seconds(9));
  EXPECT_TRUE(members_.Silent(clock_.Now()).empty());
  (void)a;
}

TEST_F(MembershipTest, CandidatesInOrder_PreviousMembersByRankThenJoinOrder) {
  members_.Add(Request("first", 1), 1);
  members_.Add(Request("second", 1), 1).record.set_group_rank(1);
  members_.Add(Request("third", 1), 1).record.set_group_rank(0);
  members_.Add(Request("fourth", 1), 1);
  std::vector<std::string> order;
  for (const Membership::Node* node : members_.CandidatesInOrder()) {
    order.push_back(node->record.node_id());
  }
  EXPECT_EQ(order, (std::vector<std::string>{"third", "second", "first", "fourth"}));
}

TEST_F(MembershipTest, Restore_NodesStartDisconnectedAndInconsistentRecordsAreDataLoss) {
  NodeRecord a = NewNodeRecord("");
  a.set_node_id("a");
  a.set_incarnation(5);
  a.set_nproc(2);
  a.set_join_seq(9);
  ASSERT_TRUE(members_.Restore({a}, RendezvousLimits{}).ok());
  EXPECT_FALSE(members_.Find("a")->connected);
  EXPECT_EQ(members_.next_join_seq(), 10u);
  EXPECT_FALSE(members_.HasChanges());

  Membership other("j", TestOptions(), clock_, {}, 1);
  NodeRecord bad = a;
  bad.set_incarnation(0);
  EXPECT_EQ(other.Restore({bad}, RendezvousLimits{}).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ddp::rendezvous
