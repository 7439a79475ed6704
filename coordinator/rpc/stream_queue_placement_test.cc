#include "coordinator/rpc/stream_queue_placement.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddp::rpc {
namespace {

TEST(StreamQueuePlacementTest, OpenQueues_GrowWithCallsBetweenMinAndMax) {
  StreamQueuePlacement placement({.min_queues = 4, .streams_per_queue = 2048, .max_queues = 64});
  EXPECT_EQ(placement.max_queues(), 64);
  EXPECT_EQ(placement.OpenQueues(0), 4);
  EXPECT_EQ(placement.OpenQueues(4 * 2048), 4);
  EXPECT_EQ(placement.OpenQueues(4 * 2048 + 1), 8);  // doubles
  EXPECT_EQ(placement.OpenQueues(16384), 8);
  EXPECT_EQ(placement.OpenQueues(16385), 16);
  EXPECT_EQ(placement.OpenQueues(65536), 32);
  EXPECT_EQ(placement.OpenQueues(1'000'000), 64);
  StreamQueuePlacement three({.min_queues = 3, .streams_per_queue = 10, .max_queues = 20});
  EXPECT_EQ(three.OpenQueues(31), 6);
  EXPECT_EQ(three.OpenQueues(121), 20);  // 24 would pass the maximum
}

TEST(StreamQueuePlacementTest, AcceptsPerQueue_ExactSizesFitWithTheirAccepts) {
  StreamQueuePlacement placement(
      {.min_queues = 4, .streams_per_queue = 2048, .max_queues = 64, .accepts_per_queue = 8});
  EXPECT_EQ(placement.OpenQueues(16384 + 32), 8);  // 16,384 agents and the 32 accepts
  EXPECT_EQ(placement.OpenQueues(65536 + 32), 32);
  EXPECT_EQ(placement.OpenQueues(8 * 2056 + 1), 16);
}

TEST(StreamQueuePlacementTest, ZeroStreamsPerQueue_FixedQueueCount) {
  StreamQueuePlacement placement({.min_queues = 3, .streams_per_queue = 0, .max_queues = 64});
  EXPECT_EQ(placement.max_queues(), 3);  // only the fixed ones are ever created
  EXPECT_EQ(placement.OpenQueues(1'000'000), 3);
  for (int i = 0; i < 30; ++i) placement.Add();
  for (int q = 0; q < 3; ++q) EXPECT_EQ(placement.calls(q), 10);
}

TEST(StreamQueuePlacementTest, Add_SpreadsOverOpenQueuesThenOpensMore) {
  StreamQueuePlacement placement({.min_queues = 2, .streams_per_queue = 3, .max_queues = 4});
  std::vector<int> picked;
  for (int i = 0; i < 6; ++i) picked.push_back(placement.Add());
  EXPECT_EQ(picked, (std::vector<int>{0, 1, 0, 1, 0, 1}));  // two queues hold 6
  EXPECT_EQ(placement.Add(), 2);  // the 7th opens two more, which take the next ones
  EXPECT_EQ(placement.Add(), 3);
  EXPECT_EQ(placement.Add(), 2);
  EXPECT_EQ(placement.Add(), 3);
  for (int i = 0; i < 29; ++i) placement.Add();  // then never past max_queues
  EXPECT_EQ(placement.calls(0) + placement.calls(1) + placement.calls(2) + placement.calls(3), 39);
  EXPECT_EQ(placement.calls(4), 0);
  for (int q = 0; q < 4; ++q) {
    EXPECT_GE(placement.calls(q), 9) << q;
    EXPECT_LE(placement.calls(q), 10) << q;
  }
}

TEST(StreamQueuePlacementTest, AddPreferred_StaysOnItsQueueWhileItHasRoom) {
  StreamQueuePlacement placement({.min_queues = 2, .streams_per_queue = 3, .max_queues = 4});
  EXPECT_EQ(placement.Add(1), 1);
  EXPECT_EQ(placement.Add(1), 1);
  EXPECT_EQ(placement.Add(1), 1);  // queue 1 is full now
  EXPECT_EQ(placement.Add(1), 0);  // the least loaded open one
  EXPECT_EQ(placement.Add(3), 0);  // queue 3 is not open yet
  EXPECT_EQ(placement.Add(0), 0);  // 6 calls: two full queues
  EXPECT_EQ(placement.Add(0), 2);  // the 7th opens queues 2 and 3
  EXPECT_EQ(placement.Add(3), 3);
  EXPECT_EQ(placement.Add(2), 2);
}

TEST(StreamQueuePlacementTest, AddPreferred_FixedQueuesAlwaysStay) {
  StreamQueuePlacement placement({.min_queues = 2, .streams_per_queue = 0, .max_queues = 2});
  for (int i = 0; i < 10; ++i) EXPECT_EQ(placement.Add(1), 1);
  EXPECT_EQ(placement.Add(), 0);
  EXPECT_EQ(placement.Add(5), 0);  // out of range: the least loaded
}

TEST(StreamQueuePlacementTest, Remove_FreedQueueIsRefilledFirst) {
  StreamQueuePlacement placement({.min_queues = 3, .streams_per_queue = 0, .max_queues = 3});
  for (int i = 0; i < 9; ++i) placement.Add();
  placement.Remove(1);
  placement.Remove(1);
  EXPECT_EQ(placement.total_calls(), 7);
  EXPECT_EQ(placement.Add(), 1);
  EXPECT_EQ(placement.Add(), 1);
  EXPECT_EQ(placement.Add(), 0);
}

TEST(StreamQueuePlacementTest, Remove_OutOfRangeOrEmptyIsIgnored) {
  StreamQueuePlacement placement({.min_queues = 2, .streams_per_queue = 0, .max_queues = 2});
  placement.Remove(0);
  placement.Remove(-1);
  placement.Remove(7);
  EXPECT_EQ(placement.total_calls(), 0);
  EXPECT_EQ(placement.Add(), 0);
  EXPECT_EQ(placement.calls(0), 1);
  EXPECT_EQ(placement.calls(9), 0);
}

TEST(StreamQueuePlacementTest, BadOptions_AreRaisedToTheSmallestValid) {
  StreamQueuePlacement placement({.min_queues = 0, .streams_per_queue = 5, .max_queues = 0});
  EXPECT_EQ(placement.max_queues(), 1);
  EXPECT_EQ(placement.OpenQueues(100), 1);
  EXPECT_EQ(placement.Add(), 0);
}

}  // namespace
}  // namespace ddp::rpc
