#include "coordinator/rendezvous/write_behind_queue.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

JobChanges NodeJoined(const std::string& job, const std::string& node) {
  JobChanges c;
  c.job_id = job;
  NodeRecord record = NewNodeRecord("");
  record.set_node_id(node);
  c.upserted_nodes.push_back(record);
  return c;
}

Outbox Message(const std::string& node) {
  Outbox out;
  OutboundMessage m;
  m.job_id = "j";
  m.node_id = node;
  m.body = StopWorkers{};
  out.messages.push_back(m);
  return out;
}

std::vector<std::string> Nodes(const Outbox& outbox) {
  std::vector<std::string> out;
  for (const OutboundMessage& m : outbox.messages) out.push_back(m.node_id);
  return out;
}

TEST(WriteBehindQueueTest, NothingPending_OutboxPassesThrough) {
  WriteBehindQueue queue;
  Outbox outbox = Message("a");
  queue.Hold(outbox);
  EXPECT_THAT(Nodes(outbox), ElementsAre("a"));
  EXPECT_EQ(queue.Mark(), 0u);
  EXPECT_EQ(queue.TakeBatch().number, 0u);
}

TEST(WriteBehindQueueTest, MessagesWaitForTheirBatch) {
  WriteBehindQueue queue;
  queue.Add(NodeJoined("j", "a"));
  Outbox outbox = Message("a");
  queue.Hold(outbox);
  EXPECT_TRUE(outbox.empty());
  EXPECT_EQ(queue.held_messages(), 1u);
  EXPECT_EQ(queue.Mark(), 1u);

  WriteBehindQueue::Batch batch = queue.TakeBatch();
  EXPECT_EQ(batch.number, 1u);
  ASSERT_EQ(batch.changes.size(), 1u);
  EXPECT_FALSE(queue.has_pending());
  EXPECT_TRUE(queue.in_flight());

  // A message produced while the batch is in flight queues behind it.
  Outbox later = Message("b");
  queue.Hold(later);
  EXPECT_TRUE(later.empty());

  Outbox released;
  EXPECT_THAT(queue.Committed(released), IsEmpty());
  EXPECT_THAT(Nodes(released), ElementsAre("a", "b"));
  EXPECT_EQ(queue.held_messages(), 0u);
  EXPECT_EQ(queue.committed(), 1u);
}

TEST(WriteBehindQueueTest, LaterBatchHeldUntilItCommits) {
  WriteBehindQueue queue;
  queue.Add(NodeJoined("j", "a"));
  Outbox first = Message("a");
  queue.Hold(first);
  WriteBehindQueue::Batch batch = queue.TakeBatch();
  queue.Add(NodeJoined("j", "b"));
  Outbox second = Message("b");
  queue.Hold(second);
  EXPECT_EQ(queue.Mark(), 2u);

  Outbox released;
  queue.Committed(released);
  EXPECT_THAT(Nodes(released), ElementsAre("a"));
  EXPECT_EQ(queue.TakeBatch().number, 2u);
  queue.Committed(released);
  EXPECT_THAT(Nodes(released), ElementsAre("a", "b"));
}

TEST(WriteBehindQueueTest, FailedBatch_RetriedFirstAndMessagesStayHeld) {
  WriteBehindQueue queue;
  queue.Add(NodeJoined("j", "a"));
  Outbox first = Message("a");
  queue.Hold(first);
  WriteBehindQueue::Batch batch = queue.TakeBatch();
  queue.Add(NodeJoined("j", "b"));
  queue.Failed(std::move(batch));
  EXPECT_FALSE(queue.in_flight());
  EXPECT_EQ(queue.pending_changes(), 2u);
  EXPECT_EQ(queue.held_messages(), 1u);

  WriteBehindQueue::Batch retry = queue.TakeBatch();
  ASSERT_EQ(retry.changes.size(), 2u);
  EXPECT_EQ(retry.changes[0].upserted_nodes[0].node_id(), "a");
  EXPECT_EQ(retry.changes[1].upserted_nodes[0].node_id(), "b");
  Outbox released;
  queue.Committed(released);
  EXPECT_THAT(Nodes(released), ElementsAre("a"));
}

TEST(WriteBehindQueueTest, WhenDurable_RunsAtCommitOfItsMark) {
  WriteBehindQueue queue;
  EXPECT_FALSE(queue.WhenDurable(queue.Mark(), [] {}));  // already durable
  queue.Add(NodeJoined("j", "a"));
  std::vector<int> ran;
  EXPECT_TRUE(queue.WhenDurable(queue.Mark(), [&] { ran.push_back(1); }));
  queue.TakeBatch();
  queue.Add(NodeJoined("j", "b"));
  EXPECT_TRUE(queue.WhenDurable(queue.Mark(), [&] { ran.push_back(2); }));
  Outbox released;
  for (auto& fn : queue.Committed(released)) fn();
  EXPECT_THAT(ran, ElementsAre(1));
  queue.TakeBatch();
  for (auto& fn : queue.Committed(released)) fn();
  EXPECT_THAT(ran, ElementsAre(1, 2));
}

TEST(WriteBehindQueueTest, EmptyChangesIgnored) {
  WriteBehindQueue queue;
  queue.Add(JobChanges{});
  EXPECT_FALSE(queue.has_pending());
}

}  // namespace
}  // namespace ddp::rendezvous
