#include "coordinator/rendezvous/stop_barrier.h"

#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

TEST(StopBarrierTest, CompleteOnceEveryMemberConfirmed) {
  StopBarrier barrier;
  EXPECT_TRUE(barrier.complete());
  barrier.Open({"a", "", "b", "a"}, kT0 + absl::Seconds(30));  // "" = a removed rank
  EXPECT_FALSE(barrier.complete());
  EXPECT_EQ(barrier.deadline(), kT0 + absl::Seconds(30));
  EXPECT_EQ(barrier.Awaited(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(barrier.Awaits("b"));
  EXPECT_TRUE(barrier.Confirm("b"));
  EXPECT_FALSE(barrier.Confirm("b")) << "a duplicate confirmation counts once";
  EXPECT_FALSE(barrier.Confirm("z")) << "not a member";
  EXPECT_FALSE(barrier.complete());
  EXPECT_TRUE(barrier.Confirm("a"));
  EXPECT_TRUE(barrier.complete());
  EXPECT_TRUE(barrier.Awaited().empty());
}

TEST(StopBarrierTest, CloseDropsTheBarrierButKeepsTheFence) {
  StopBarrier barrier;
  barrier.FenceUntil(kT0 + absl::Seconds(3));
  barrier.FenceUntil(kT0 + absl::Seconds(1));  // earlier: the later fence stays
  barrier.Open({"a"}, kT0 + absl::Seconds(30));
  barrier.Close();
  EXPECT_TRUE(barrier.complete());
  EXPECT_FALSE(barrier.Awaits("a"));
  EXPECT_EQ(barrier.deadline(), absl::InfiniteFuture());
  EXPECT_EQ(barrier.fenced_until(), kT0 + absl::Seconds(3));
}

}  // namespace
}  // namespace ddp::rendezvous
