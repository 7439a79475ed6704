#include "common/stack_groups.h"

#include "gtest/gtest.h"

namespace ddp {
namespace {

constexpr char kAllReduce[] =
    "Thread 0x00007f3a1b2c3d40 (most recent call first):\n"
    "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1320 "
    "in all_reduce\n"
    "  File \"/job/train.py\", line 20 in step\n"
    "\n";
constexpr char kAllReduceOtherThread[] =
    "Current thread 0x00007f00aaaabbbb (most recent call first):  \n"
    "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1320 "
    "in all_reduce\n"
    "  File \"/job/train.py\", line 20 in step\n";
constexpr char kSleep[] =
    "Current thread 0x00007f3a1b2c3d40 (most recent call first):\n"
    "  File \"/job/train.py\", line 17 in step\n";

TEST(NormalizeStackTest, ThreadIdsAndBlankLines_Removed) {
  EXPECT_EQ(NormalizeStack(kAllReduce), NormalizeStack(kAllReduceOtherThread));
  EXPECT_EQ(NormalizeStack(kSleep),
            "Thread (most recent call first):\n  File \"/job/train.py\", line 17 in step");
}

TEST(NormalizeStackTest, DifferentLine_StaysDifferent) {
  EXPECT_NE(NormalizeStack(kSleep), NormalizeStack(kAllReduce));
}

TEST(GroupStacksTest, OddRankOut_ComesFirstAlone) {
  const std::vector<StackGroup> groups = GroupStacks({{3, "b", kAllReduce, ""},
                                                      {2, "b", kSleep, ""},
                                                      {0, "a", kAllReduceOtherThread, ""},
                                                      {1, "a", kAllReduce, ""}});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].ranks, std::vector<int64_t>({2}));
  EXPECT_NE(groups[0].stack.find("line 17 in step"), std::string::npos);
  EXPECT_EQ(groups[1].ranks, std::vector<int64_t>({0, 1, 3}));
  EXPECT_NE(groups[1].stack.find("in all_reduce"), std::string::npos);
}

TEST(GroupStacksTest, MissingStacks_GroupedByError) {
  const std::vector<StackGroup> groups = GroupStacks({{0, "a", kSleep, ""},
                                                      {1, "b", "", "node b did not answer"},
                                                      {2, "b", "", "node b did not answer"}});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[1].ranks, std::vector<int64_t>({1, 2}));
  EXPECT_EQ(groups[1].stack, "no stack: node b did not answer");
}

TEST(FormatStackGroupsTest, RankAndRanks_Headers) {
  const std::string text = FormatStackGroups(
      GroupStacks({{0, "a", kAllReduce, ""}, {1, "a", kAllReduce, ""}, {2, "a", kSleep, ""}}));
  EXPECT_EQ(text,
            "rank 2:\n"
            "  Thread (most recent call first):\n"
            "    File \"/job/train.py\", line 17 in step\n"
            "ranks 0,1:\n"
            "  Thread (most recent call first):\n"
            "    File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", "
            "line 1320 in all_reduce\n"
            "    File \"/job/train.py\", line 20 in step\n");
}

}  // namespace
}  // namespace ddp
