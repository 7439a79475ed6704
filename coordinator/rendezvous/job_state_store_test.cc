#include "coordinator/rendezvous/job_state_store.h"

#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

NodeRecord Node(const std::string& id, int rank) {
  NodeRecord r = NewNodeRecord("");
  r.set_node_id(id);
  r.set_incarnation(7);
  r.set_group_rank(rank);
  return r;
}

TEST(InMemoryJobStateStore, ApplyThenLoad_RoundTrips) {
  InMemoryJobStateStore store;
  JobChanges c;
  c.job_id = "j";
  c.job = NewJobRecord("j", DefaultJobSettings(), absl::Time());
  c.job->set_generation(3);
  c.counters = JobCounters{42, 9};
  c.upserted_nodes = {Node("a", 0), Node("b", 1)};
  ASSERT_TRUE(store.Apply(c).ok());
  JobChanges d;
  d.job_id = "j";
  d.removed_nodes = {"a"};
  ASSERT_TRUE(store.Apply(d).ok());
  auto all = store.LoadAll();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].job.generation(), 3);
  EXPECT_EQ((*all)[0].job.last_event_index(), 42);  // the counters win
  EXPECT_EQ((*all)[0].job.next_join_seq(), 9u);
  ASSERT_EQ((*all)[0].nodes.size(), 1u);
  EXPECT_EQ((*all)[0].nodes[0].node_id(), "b");
}

TEST(InMemoryJobStateStore, NodesWithoutJob_InvalidArgument) {
  InMemoryJobStateStore store;
  JobChanges c;
  c.job_id = "nojob";
  c.upserted_nodes = {Node("a", 0)};
  EXPECT_EQ(store.Apply(c).code(), absl::StatusCode::kInvalidArgument);
}

TEST(InMemoryJobStateStore, FailWith_ApplyFailsUntilCleared) {
  InMemoryJobStateStore store;
  store.FailWith(absl::UnavailableError("disk"));
  JobChanges c;
  c.job_id = "j";
  c.job = JobRecord{};
  EXPECT_EQ(store.Apply(c).code(), absl::StatusCode::kUnavailable);
  store.FailWith(absl::OkStatus());
  EXPECT_TRUE(store.Apply(c).ok());
}

TEST(JobChanges, Merge_LaterWinsAndRemovalsCancelUpserts) {
  JobChanges a;
  a.job_id = "j";
  a.upserted_nodes = {Node("x", 0), Node("y", 1)};
  JobChanges b;
  b.job_id = "j";
  b.removed_nodes = {"x"};
  b.upserted_nodes = {Node("y", 5), Node("z", 2)};
  a.Merge(b);
  ASSERT_EQ(a.upserted_nodes.size(), 2u);
  EXPECT_EQ(a.upserted_nodes[0].node_id(), "y");
  EXPECT_EQ(a.upserted_nodes[0].group_rank(), 5);
  EXPECT_EQ(a.upserted_nodes[1].node_id(), "z");
  EXPECT_EQ(a.removed_nodes, std::vector<std::string>{"x"});
}

}  // namespace
}  // namespace ddp::rendezvous
