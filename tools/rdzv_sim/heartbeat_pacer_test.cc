#include "tools/rdzv_sim/heartbeat_pacer.h"

#include <map>

#include "gtest/gtest.h"

namespace ddp::rdzv_sim {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

TEST(HeartbeatPacer, TakeDue_OverOneInterval_EachAgentOnceEvenly) {
  HeartbeatPacer pacer(100, absl::Milliseconds(500), kT0);
  std::map<int, int> sends;
  for (int tick = 1; tick <= 50; ++tick) {  // 10 ms ticks
    std::vector<int> due;
    pacer.TakeDue(kT0 + absl::Milliseconds(10 * tick), &due);
    EXPECT_EQ(due.size(), 2u) << "tick " << tick;
    for (int i : due) ++sends[i];
  }
  EXPECT_EQ(sends.size(), 100u);
  for (const auto& [agent, count] : sends) EXPECT_EQ(count, 1) << agent;
  EXPECT_EQ(pacer.owed_total(), 100);
}

TEST(HeartbeatPacer, TakeDue_BeforeStartOrSameTime_Nothing) {
  HeartbeatPacer pacer(10, absl::Milliseconds(500), kT0);
  std::vector<int> due;
  pacer.TakeDue(kT0 - absl::Seconds(1), &due);
  pacer.TakeDue(kT0, &due);
  EXPECT_TRUE(due.empty());
}

TEST(HeartbeatPacer, TakeDue_StalledForThreeIntervals_OneRoundOnly) {
  HeartbeatPacer pacer(10, absl::Milliseconds(500), kT0);
  std::vector<int> due;
  pacer.TakeDue(kT0 + absl::Milliseconds(1500), &due);
  EXPECT_EQ(due.size(), 10u);
  due.clear();
  pacer.TakeDue(kT0 + absl::Milliseconds(1550), &due);
  EXPECT_EQ(due.size(), 1u);       // back on pace, backlog dropped
  EXPECT_EQ(pacer.skipped(), 20);  // 30 owed at 1,500 ms, 10 sent
}

TEST(HeartbeatPacer, TakeDue_OnPace_NothingSkipped) {
  HeartbeatPacer pacer(10, absl::Milliseconds(500), kT0);
  std::vector<int> due;
  for (int ms = 100; ms <= 2000; ms += 100) pacer.TakeDue(kT0 + absl::Milliseconds(ms), &due);
  EXPECT_EQ(due.size(), 40u);
  EXPECT_EQ(pacer.skipped(), 0);
}

TEST(HeartbeatPacer, TakeDue_RoundRobinContinuesAcrossCalls) {
  HeartbeatPacer pacer(3, absl::Milliseconds(300), kT0);
  std::vector<int> due;
  for (int ms = 100; ms <= 500; ms += 100) {
    pacer.TakeDue(kT0 + absl::Milliseconds(ms), &due);
  }
  EXPECT_EQ(due, (std::vector<int>{0, 1, 2, 0, 1}));
}

}  // namespace
}  // namespace ddp::rdzv_sim
