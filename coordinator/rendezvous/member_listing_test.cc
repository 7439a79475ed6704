#include "coordinator/rendezvous/member_listing.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

v1::Member Node(std::string id, int nproc, int group_rank, int64_t heartbeat_age_ms = 0) {
  v1::Member m;
  m.set_node_id(std::move(id));
  m.set_nproc(nproc);
  m.set_group_rank(group_rank);
  m.set_heartbeat_age_ms(heartbeat_age_ms);
  return m;
}

TEST(ListMembers, Running_MembersSortedWithOffsetsAndSparesSeparate) {
  std::vector<v1::Member> nodes = {Node("a", 2, 0), Node("b", 4, 1, 20), Node("c", 8, -1)};
  v1::Job job;
  ListMembers(/*finished=*/false, std::move(nodes), &job);
  ASSERT_EQ(job.members_size(), 2);
  EXPECT_EQ(job.members(0).node_id(), "a");
  EXPECT_EQ(job.members(0).global_rank_offset(), 0);
  EXPECT_EQ(job.members(1).node_id(), "b");
  EXPECT_EQ(job.members(1).global_rank_offset(), 2);
  EXPECT_EQ(job.members(1).heartbeat_age_ms(), 20);
  ASSERT_EQ(job.spares_size(), 1);
  EXPECT_EQ(job.spares(0).node_id(), "c");
}

TEST(ListMembers, MembersOutOfNodeOrder_SortedByGroupRank) {
  std::vector<v1::Member> nodes = {Node("a", 2, 1), Node("b", 2, 0)};
  v1::Job job;
  ListMembers(/*finished=*/false, std::move(nodes), &job);
  ASSERT_EQ(job.members_size(), 2);
  EXPECT_EQ(job.members(0).node_id(), "b");
  EXPECT_EQ(job.members(1).node_id(), "a");
  EXPECT_EQ(job.members(1).global_rank_offset(), 2);
}

TEST(ListMembers, GapInRanks_OffsetsAndGlobalRanksUnknown) {
  std::vector<v1::Member> nodes = {Node("a", 2, 0), Node("c", 2, 2)};
  nodes[1].add_progress()->set_local_rank(1);
  v1::Job job;
  ListMembers(/*finished=*/false, std::move(nodes), &job);
  ASSERT_EQ(job.members_size(), 2);
  EXPECT_EQ(job.members(0).global_rank_offset(), -1);
  EXPECT_EQ(job.members(1).global_rank_offset(), -1);
  EXPECT_EQ(job.members(1).progress(0).global_rank(), -1);
}

TEST(ListMembers, Progress_GlobalRankIsOffsetPlusLocalRank) {
  std::vector<v1::Member> nodes = {Node("a", 2, 0), Node("b", 2, 1)};
  WorkerProgress p;
  p.local_rank = 1;
  p.generation = 3;
  p.step = 42;
  p.steps_per_second = 4.5;
  const absl::Time now = absl::FromUnixSeconds(1000);
  p.reported = now - absl::Seconds(3);
  p.metrics["loss"] = 0.25;
  *nodes[1].add_progress() = ProgressToApi(p, now);
  v1::Job job;
  ListMembers(/*finished=*/false, std::move(nodes), &job);
  ASSERT_EQ(job.members(1).progress_size(), 1);
  const v1::WorkerProgress& out = job.members(1).progress(0);
  EXPECT_EQ(out.global_rank(), 3);  // b's offset 2 + local rank 1
  EXPECT_EQ(out.generation(), 3);
  EXPECT_EQ(out.step(), 42);
  EXPECT_EQ(out.age_ms(), 3000);
  EXPECT_DOUBLE_EQ(out.steps_per_second(), 4.5);
  EXPECT_DOUBLE_EQ(out.metrics().at("loss"), 0.25);
  EXPECT_EQ(job.members(0).progress_size(), 0);
}

TEST(ProgressToApi, ReportFromTheFuture_AgeZeroCheckpointInUnixMs) {
  WorkerProgress p;
  const absl::Time now = absl::FromUnixSeconds(1000);
  p.reported = now + absl::Seconds(1);
  EXPECT_EQ(ProgressToApi(p, now).age_ms(), 0);
  EXPECT_EQ(ProgressToApi(p, now).global_rank(), -1);
  EXPECT_EQ(ProgressToApi(p, now).checkpoint_unix_ms(), 0);
  p.checkpoint = absl::FromUnixSeconds(990);
  p.checkpoint_step = 6;
  EXPECT_EQ(ProgressToApi(p, now).checkpoint_unix_ms(), 990'000);
  EXPECT_EQ(ProgressToApi(p, now).checkpoint_step(), 6);
}

TEST(ListMembers, FinishedJob_RegisteredNodesAreMembersNotSpares) {
  // Once finished the core reports no ranks (group_rank -1).
  std::vector<v1::Member> nodes = {Node("a", 2, -1), Node("b", 2, -1)};
  v1::Job job;
  ListMembers(/*finished=*/true, std::move(nodes), &job);
  ASSERT_EQ(job.members_size(), 2);
  EXPECT_EQ(job.members(0).node_id(), "a");
  EXPECT_EQ(job.members(1).node_id(), "b");
  EXPECT_EQ(job.members(1).group_rank(), -1);
  EXPECT_EQ(job.members(1).global_rank_offset(), -1);
  EXPECT_EQ(job.spares_size(), 0);
}

}  // namespace
}  // namespace ddp::rendezvous
