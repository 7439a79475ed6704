#include "common/coordinator_endpoints.h"

#include "gtest/gtest.h"

namespace ddp {
namespace {

TEST(CoordinatorEndpointsTest, WithoutHints_RoundRobin) {
  CoordinatorEndpoints e({"a:1", "b:1", "c:1"});
  EXPECT_EQ(e.current(), "a:1");
  EXPECT_FALSE(e.Next(""));
  EXPECT_EQ(e.current(), "b:1");
  EXPECT_FALSE(e.Next(""));
  EXPECT_FALSE(e.Next(""));
  EXPECT_EQ(e.current(), "a:1");
  EXPECT_EQ(e.Joined(), "a:1,b:1,c:1");
}

TEST(CoordinatorEndpointsTest, AHintIsFollowedAtOnce_ThenTheListResumes) {
  CoordinatorEndpoints e({"a:1", "b:1", "c:1"});
  EXPECT_TRUE(e.Next("c:1"));
  EXPECT_EQ(e.current(), "c:1");
  // The hinted leader names itself (stale) or fails: the list goes on after
  // the one that named it.
  EXPECT_FALSE(e.Next("c:1"));
  EXPECT_EQ(e.current(), "b:1");
  // A leader outside the list (another address of it) is followed too.
  EXPECT_TRUE(e.Next("leader.example:29400"));
  EXPECT_EQ(e.current(), "leader.example:29400");
  EXPECT_FALSE(e.Next(""));
  EXPECT_EQ(e.current(), "c:1");
}

// A standby names the leader by an address this client cannot reach (its
// advertised host, from inside another network); the leader is in the list
// under an address that works. The client must get there, not bounce between
// the standby and the unreachable name.
TEST(CoordinatorEndpointsTest, UnreachableLeaderName_NotFollowedAgain_ListReachesTheLeader) {
  CoordinatorEndpoints e({"10.0.0.1:1", "10.0.0.1:2", "10.0.0.1:3"});  // :3 leads
  EXPECT_FALSE(e.Next(""));  // :1 is down
  EXPECT_EQ(e.current(), "10.0.0.1:2");
  EXPECT_TRUE(e.Next("127.0.0.1:3"));  // the standby names the leader's advertised host
  EXPECT_FALSE(e.Next(""));            // unreachable from here
  EXPECT_EQ(e.current(), "10.0.0.1:3");
  // Had :3 failed and a standby named the same unreachable host again this
  // round, it would not be followed.
  CoordinatorEndpoints f({"a:1", "b:1", "c:1"});
  EXPECT_TRUE(f.Next("x:9"));
  EXPECT_FALSE(f.Next(""));  // x:9 fails
  EXPECT_EQ(f.current(), "b:1");
  EXPECT_FALSE(f.Next("x:9"));  // b names x:9 again: ignored this round
  EXPECT_EQ(f.current(), "c:1");
  EXPECT_FALSE(f.Next(""));  // the round ends
  EXPECT_EQ(f.current(), "a:1");
  EXPECT_TRUE(f.Next("x:9"));  // trusted again
}

TEST(CoordinatorEndpointsTest, OneEndpoint_StaysThere) {
  CoordinatorEndpoints e({"a:1"});
  EXPECT_FALSE(e.Next(""));
  EXPECT_EQ(e.current(), "a:1");
}

}  // namespace
}  // namespace ddp
