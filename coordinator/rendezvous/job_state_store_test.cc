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

TEST(JobRecord, NewJobRecord_RunOneWaitingFirstJoinSeqOne) {
  const absl::Time created = absl::FromUnixNanos(1'700'000'000'000'000'007);
  const JobRecord r = NewJobRecord("j", DefaultJobSettings(), created);
  EXPECT_EQ(r.job_id(), "j");
  EXPECT_EQ(r.settings().ShortDebugString(), DefaultJobSettings().ShortDebugString());
  EXPECT_EQ(JobStateOf(r), JobState::kWaiting);
  EXPECT_EQ(r.run(), 1);
  EXPECT_EQ(CreatedAt(r), created);  // to the nanosecond
  EXPECT_EQ(FinishedAt(r), absl::Time());
  EXPECT_FALSE(RootCauseOf(r).has_value());
  EXPECT_EQ(CountersOf(r).last_event_index, 0);
  EXPECT_EQ(CountersOf(r).next_join_seq, 1u);
}

TEST(JobRecord, Accessors_TypedValuesRoundTrip) {
  JobRecord r;
  SetJobState(JobState::kCancelled, &r);
  EXPECT_EQ(r.state(), 6);  // the stored number
  EXPECT_EQ(JobStateOf(r), JobState::kCancelled);
  SetFinished(absl::FromUnixMillis(1'700'000'000'123), &r);
  EXPECT_EQ(r.finished_unix_ns(), 1'700'000'000'123'000'000);
  SetFinished(absl::Time(), &r);  // unknown is 0
  EXPECT_EQ(r.finished_unix_ns(), 0);
  EXPECT_EQ(FinishedAt(r), absl::Time());
  r.mutable_cause()->set_exit_code(3);
  ASSERT_TRUE(RootCauseOf(r).has_value());
  EXPECT_EQ(RootCauseOf(r)->exit_code(), 3);
  SetCounters(JobCounters{7, 8}, &r);
  EXPECT_EQ(r.last_event_index(), 7);
  EXPECT_EQ(r.next_join_seq(), 8u);
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
