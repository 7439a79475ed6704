#include "coordinator/rendezvous/rendezvous_round.h"

#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

JobSettings Sizes(int min_nodes, int max_nodes, absl::Duration last_call) {
  JobSettings settings = DefaultJobSettings();
  settings.set_min_nodes(min_nodes);
  settings.set_max_nodes(max_nodes);
  settings.set_last_call_timeout_ms(absl::ToInt64Milliseconds(last_call));
  return settings;
}

TEST(RendezvousRoundTest, ReadyToClose_AtMaxAtOnceAtMinAfterTheLastCall) {
  RendezvousRound round(0, MasterInfo());
  round.Open(kT0 + absl::Minutes(5));
  const JobSettings settings = Sizes(2, 3, absl::Seconds(10));
  EXPECT_FALSE(round.ReadyToClose(1, settings, kT0));
  EXPECT_FALSE(round.ReadyToClose(2, settings, kT0 + absl::Seconds(1)));  // last call starts
  EXPECT_FALSE(round.LastCallOver(kT0 + absl::Seconds(10), LastCallTimeout(settings)));
  EXPECT_TRUE(round.LastCallOver(kT0 + absl::Seconds(11), LastCallTimeout(settings)));
  round.MinNoLongerReached();
  EXPECT_FALSE(round.LastCallOver(kT0 + absl::Seconds(11), LastCallTimeout(settings)));
  EXPECT_TRUE(round.ReadyToClose(3, settings, kT0 + absl::Seconds(12)));
  EXPECT_TRUE(
      RendezvousRound(0, MasterInfo()).ReadyToClose(2, Sizes(2, 3, absl::ZeroDuration()), kT0))
      << "no last call";
  EXPECT_FALSE(round.JoinTimedOut(kT0 + absl::Minutes(5) - absl::Seconds(1)));
  EXPECT_TRUE(round.JoinTimedOut(kT0 + absl::Minutes(5)));
}

TEST(RendezvousRoundTest, Close_FormsTheNextGenerationAndAwaitsTheMaster) {
  RendezvousRound round(4, NewMasterInfo("old", 1, ""));
  round.Open(kT0 + absl::Minutes(5));
  absl::StatusOr<RankTable> table =
      round.Close({RankMember{"a", 2, -1, -1}, RankMember{"b", 1, 0, -1}}, kT0 + absl::Seconds(30));
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(round.generation(), 5);
  EXPECT_EQ(round.members().by_rank, (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(round.members().world_size, 3);
  EXPECT_EQ(round.members().live, 2);
  EXPECT_TRUE(round.master().master_addr().empty());
  EXPECT_FALSE(round.JoinTimedOut(kT0 + absl::Hours(1))) << "closed: no join deadline";
  EXPECT_FALSE(round.MasterInfoOverdue(kT0 + absl::Seconds(29)));
  EXPECT_TRUE(round.MasterInfoOverdue(kT0 + absl::Seconds(30)));
  round.Postpone(absl::Seconds(5));
  EXPECT_FALSE(round.MasterInfoOverdue(kT0 + absl::Seconds(34)));
}

TEST(RendezvousRoundTest, Start_AssignmentsCarryMasterAndRoleRanksOnlyWithSeveralRoles) {
  RendezvousRound round(0, MasterInfo());
  ASSERT_TRUE(round
                  .Close({RankMember{"a", 2, -1, -1}, RankMember{"b", 2, -1, -1},
                          RankMember{"c", 1, -1, -1}},
                         kT0)
                  .ok());
  round.Start(
      NewMasterInfo("a.local", 29500, ""),
      {MemberRole{"a", "trainer", 2}, MemberRole{"b", "reader", 2}, MemberRole{"c", "trainer", 1}});
  EXPECT_FALSE(round.MasterInfoOverdue(kT0 + absl::Hours(1)));
  NodeRecord c = NewNodeRecord("");
  c.set_node_id("c");
  c.set_group_rank(2);
  c.set_global_rank_offset(4);
  c.set_nproc(1);
  Assignment a = round.AssignmentFor(c, 1, 3);
  EXPECT_EQ(a.generation, 1);
  EXPECT_EQ(a.group_world_size, 3);
  EXPECT_EQ(a.world_size, 5);
  EXPECT_EQ(a.master_addr, "a.local");
  EXPECT_EQ(a.role_rank_offset, 2);
  EXPECT_EQ(a.role_world_size, 3);
  EXPECT_EQ(a.restart_count, 1);

  round.Start(NewMasterInfo("a.local", 29500, ""),
              {MemberRole{"a", "x", 2}, MemberRole{"b", "x", 2}, MemberRole{"c", "x", 1}});
  EXPECT_EQ(round.AssignmentFor(c, 1, 3).role_world_size, 0) << "one role: left out";
}

TEST(RendezvousRoundTest, EffectiveMasterInfo_DefaultsTheAddressAndRefusesBadFields) {
  absl::StatusOr<MasterInfo> info =
      RendezvousRound::EffectiveMasterInfo(NewMasterInfo("", 29500, ""), "a", "a.local", 255);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->master_addr(), "a.local");
  EXPECT_EQ(RendezvousRound::EffectiveMasterInfo(NewMasterInfo("", 29500, ""), "a", "", 255)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      RendezvousRound::EffectiveMasterInfo(NewMasterInfo("x", 0, ""), "a", "", 255).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RendezvousRound::EffectiveMasterInfo(NewMasterInfo("x", 1, "short"), "a", "", 255)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RendezvousRoundTest, RestoreMembers_TwoNodesOnOneRankIsDataLoss) {
  RendezvousRound round(3, MasterInfo());
  ASSERT_TRUE(round.RestoreMembers({{"a", 1}, {"b", -1}, {"c", 0}}, 7, "j").ok());
  EXPECT_EQ(round.members().by_rank, (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(round.members().live, 2);
  EXPECT_EQ(round.members().world_size, 7);
  RendezvousRound broken(3, MasterInfo());
  EXPECT_EQ(broken.RestoreMembers({{"a", 0}, {"b", 0}}, 2, "j").code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ddp::rendezvous
