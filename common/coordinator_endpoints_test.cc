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
  // The hinted leader names itself (stale) or fails: back to the list.
  EXPECT_FALSE(e.Next("c:1"));
  EXPECT_EQ(e.current(), "a:1");
  // A leader outside the list (another address of it) is followed too.
  EXPECT_TRUE(e.Next("leader.example:29400"));
  EXPECT_EQ(e.current(), "leader.example:29400");
  EXPECT_FALSE(e.Next(""));
  EXPECT_EQ(e.current(), "a:1");
}

TEST(CoordinatorEndpointsTest, OneEndpoint_StaysThere) {
  CoordinatorEndpoints e({"a:1"});
  EXPECT_FALSE(e.Next(""));
  EXPECT_EQ(e.current(), "a:1");
}

}  // namespace
}  // namespace ddp
