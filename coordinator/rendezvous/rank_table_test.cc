#include "coordinator/rendezvous/rank_table.h"

#include <algorithm>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

RankMember M(const std::string& id, int nproc = 1, int requested = -1, int previous = -1) {
  return RankMember{id, nproc, requested, previous};
}

std::vector<std::string> Order(const RankTable& t) {
  std::vector<std::string> out;
  for (const RankEntry& e : t.entries) out.push_back(e.node_id);
  return out;
}

TEST(ComputeRankTable, NewNodes_JoinOrder) {
  auto t = ComputeRankTable({M("a"), M("b"), M("c")});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(Order(*t), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(ComputeRankTable, HeterogeneousCounts_PrefixSumOffsets) {
  auto t = ComputeRankTable({M("a", 8), M("b", 2), M("c", 4)});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->entries[0].global_rank_offset, 0);
  EXPECT_EQ(t->entries[1].global_rank_offset, 8);
  EXPECT_EQ(t->entries[2].global_rank_offset, 10);
  EXPECT_EQ(t->world_size, 14);
}

TEST(ComputeRankTable, StickyRanks_SurvivorsKeepRanks) {
  // b had rank 1, c rank 2; a (rank 0) left... no: d (rank 3) left, e is new.
  auto t = ComputeRankTable({M("e"), M("c", 1, -1, 2), M("a", 1, -1, 0), M("b", 1, -1, 1)});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(Order(*t), (std::vector<std::string>{"a", "b", "c", "e"}));
}

TEST(ComputeRankTable, RankZeroLeft_PreviousMemberBeforeNewNode) {
  auto t = ComputeRankTable({M("new"), M("b", 1, -1, 1), M("c", 1, -1, 2)});
  ASSERT_TRUE(t.ok());
  // Rank 0 is free: a previous member (b keeps 1, c keeps 2) cannot move
  // without losing its rank, so the new node fills rank 0.
  EXPECT_EQ(Order(*t), (std::vector<std::string>{"new", "b", "c"}));
  // When the world shrinks, the member whose old rank no longer fits takes rank
  // 0.
  t = ComputeRankTable({M("b", 1, -1, 1), M("d", 1, -1, 3), M("new")});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(Order(*t), (std::vector<std::string>{"d", "b", "new"}));
}

TEST(ComputeRankTable, RequestedRanks_Honoured) {
  auto t = ComputeRankTable({M("a", 1, 2), M("b", 1, 0), M("c", 1, 1)});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(Order(*t), (std::vector<std::string>{"b", "c", "a"}));
  EXPECT_TRUE(t->ignored_requests.empty());
}

TEST(ComputeRankTable, ContestedOrOutOfRangeRequests_Ignored) {
  auto t = ComputeRankTable({M("a", 1, 1), M("b", 1, 1), M("c", 1, 7)});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->ignored_requests.size(), 3u);
  EXPECT_EQ(Order(*t), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(ComputeRankTable, BadInput_InvalidArgument) {
  EXPECT_EQ(ComputeRankTable({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeRankTable({M("a"), M("a")}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeRankTable({M("a", 0)}).status().code(), absl::StatusCode::kInvalidArgument);
}

// Property test: random previous tables, departures, arrivals and requests.
TEST(ComputeRankTable, RandomMemberships_InvariantsHold) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 2000; ++round) {
    int previous_n = rng() % 12;
    std::vector<RankMember> members;
    for (int r = 0; r < previous_n; ++r) {
      if (rng() % 3 == 0) continue;  // left
      members.push_back(M(absl::StrCat("p", r), 1 + rng() % 8, -1, r));
    }
    int arrivals = rng() % 5;
    for (int i = 0; i < arrivals; ++i) {
      members.push_back(M(absl::StrCat("n", i), 1 + rng() % 8));
    }
    if (members.empty()) continue;
    std::shuffle(members.begin(), members.end(), rng);
    const bool with_requests = rng() % 4 == 0;
    if (with_requests) {
      for (RankMember& m : members) {
        if (rng() % 2) m.requested_rank = rng() % (members.size() + 1);
      }
    }
    auto t = ComputeRankTable(members);
    ASSERT_TRUE(t.ok());
    const int n = members.size();
    ASSERT_EQ(static_cast<int>(t->entries.size()), n);
    std::set<std::string> ids;
    int64_t offset = 0;
    for (int r = 0; r < n; ++r) {
      const RankEntry& e = t->entries[r];
      EXPECT_EQ(e.group_rank, r);
      EXPECT_EQ(e.global_rank_offset, offset);
      offset += e.nproc;
      ids.insert(e.node_id);
    }
    EXPECT_EQ(static_cast<int>(ids.size()), n);  // a permutation
    EXPECT_EQ(t->world_size, offset);
    std::set<std::string> ignored(t->ignored_requests.begin(), t->ignored_requests.end());
    for (const RankMember& m : members) {
      int got = -1;
      for (const RankEntry& e : t->entries) {
        if (e.node_id == m.node_id) {
          got = e.group_rank;
          EXPECT_EQ(e.nproc, m.nproc);
        }
      }
      if (m.requested_rank >= 0 && !ignored.count(m.node_id)) {
        EXPECT_EQ(got, m.requested_rank);
      }
      if (!with_requests && m.previous_group_rank >= 0 && m.previous_group_rank < n) {
        EXPECT_EQ(got, m.previous_group_rank) << "sticky rank lost";
      }
      if (!with_requests && m.previous_group_rank == 0) {
        EXPECT_EQ(got, 0) << "rank 0 moved although its node stayed";
      }
    }
  }
}

}  // namespace
}  // namespace ddp::rendezvous
