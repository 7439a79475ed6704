#include "coordinator/rendezvous/stragglers.h"

#include <vector>

#include "gtest/gtest.h"

namespace ddp::rendezvous {
namespace {

std::vector<WorkerProgress> Ranks(const std::vector<double>& steps_per_second) {
  std::vector<WorkerProgress> out;
  for (size_t i = 0; i < steps_per_second.size(); ++i) {
    WorkerProgress p;
    p.local_rank = static_cast<int>(i);
    p.generation = 2;
    p.steps_per_second = steps_per_second[i];
    out.push_back(p);
  }
  return out;
}

std::vector<WorkerProgress*> Pointers(std::vector<WorkerProgress>& reports) {
  std::vector<WorkerProgress*> out;
  for (WorkerProgress& p : reports) out.push_back(&p);
  return out;
}

TEST(ScoreStragglers, OneRankAThirdSlower_FlaggedOthersNot) {
  std::vector<WorkerProgress> reports = Ranks({3.0, 3.0, 2.0, 3.1});
  ScoreStragglers(Pointers(reports), 2);
  EXPECT_FALSE(reports[0].straggler);
  EXPECT_TRUE(reports[2].straggler);
  EXPECT_NEAR(reports[2].relative_speed, 2.0 / 3.0, 1e-9);
  EXPECT_FALSE(reports[3].straggler);
}

TEST(ScoreStragglers, EvenRun_NobodyFlagged) {
  std::vector<WorkerProgress> reports = Ranks({3.0, 2.9, 3.1, 2.8, 3.05});
  ScoreStragglers(Pointers(reports), 2);
  for (const WorkerProgress& p : reports) EXPECT_FALSE(p.straggler) << p.local_rank;
}

TEST(ScoreStragglers, StepTimeOnEveryReport_UsedOverTheEqualRates) {
  // Synchronous DDP: every rank steps at the same rate; the step times tell.
  std::vector<WorkerProgress> reports = Ranks({2.0, 2.0, 2.0});
  reports[0].metrics[kStepTimeMetric] = 0.2;
  reports[1].metrics[kStepTimeMetric] = 0.2;
  reports[2].metrics[kStepTimeMetric] = 0.3;  // 50 % longer per step
  ScoreStragglers(Pointers(reports), 2);
  EXPECT_TRUE(reports[2].straggler);
  EXPECT_FALSE(reports[0].straggler);
  reports[0].metrics.clear();  // not on every report: steps per second, all equal
  ScoreStragglers(Pointers(reports), 2);
  EXPECT_FALSE(reports[2].straggler);
}

TEST(ScoreStragglers, TwoRanksOrOtherGenerations_NobodyFlagged) {
  std::vector<WorkerProgress> two = Ranks({3.0, 1.0});
  ScoreStragglers(Pointers(two), 2);
  EXPECT_FALSE(two[1].straggler);
  std::vector<WorkerProgress> old = Ranks({3.0, 3.0, 1.0});
  old[2].generation = 1;  // a report from before the restart
  old[2].straggler = true;
  ScoreStragglers(Pointers(old), 2);
  EXPECT_FALSE(old[2].straggler);
  EXPECT_EQ(old[2].relative_speed, 0);
}

// The CPU busy share each rank's agent measured (per-mille of one core).
std::vector<WorkerActivity> Busy(const std::vector<int>& permille) {
  std::vector<WorkerActivity> out;
  for (size_t i = 0; i < permille.size(); ++i) {
    WorkerActivity w;
    w.local_rank = static_cast<int>(i);
    w.cpu_busy_permille = permille[i];
    out.push_back(w);
  }
  return out;
}

const absl::Time kHeartbeat = absl::FromUnixSeconds(1000);

TEST(ScoreStragglers, CpuBusy_RankWithHalfAgainTheWork_FlaggedFromCpu) {
  // 30 ms of CPU per 150 ms step; rank 2 spends 45 ms.
  std::vector<WorkerProgress> ranks;
  AddCpuBusyRanks(Busy({200, 205, 300, 195}), 2, kHeartbeat, &ranks);
  ASSERT_EQ(ranks.size(), 4u);
  EXPECT_EQ(ranks[2].reported, kHeartbeat);
  EXPECT_DOUBLE_EQ(ranks[2].cpu_busy, 0.3);
  ScoreStragglers(Pointers(ranks), 2);
  EXPECT_TRUE(ranks[2].straggler);
  // Its speed, 1 / 0.3, over the median of the speeds (those of 0.2 and 0.205).
  EXPECT_NEAR(ranks[2].relative_speed, (1 / 0.3) / ((1 / 0.2 + 1 / 0.205) / 2), 1e-9);
  EXPECT_EQ(ranks[2].speed_source, v1::SPEED_SOURCE_CPU_BUSY);
  for (int i : {0, 1, 3}) EXPECT_FALSE(ranks[i].straggler) << i;
}

TEST(ScoreStragglers, CpuBusy_EvenRun_NobodyFlagged) {
  std::vector<WorkerProgress> ranks;
  AddCpuBusyRanks(Busy({200, 215, 190, 230}), 2, kHeartbeat, &ranks);
  ScoreStragglers(Pointers(ranks), 2);
  for (const WorkerProgress& p : ranks) {
    EXPECT_FALSE(p.straggler) << p.local_rank;
    EXPECT_GT(p.relative_speed, 0) << p.local_rank;
  }
}

TEST(ScoreStragglers, CpuBusy_IdleJobOrTwoRanks_NobodyScored) {
  // Asleep or blocked on I/O: a few per-mille, noise.
  std::vector<WorkerProgress> idle;
  AddCpuBusyRanks(Busy({3, 3, 12, 4}), 2, kHeartbeat, &idle);
  ScoreStragglers(Pointers(idle), 2);
  for (const WorkerProgress& p : idle) EXPECT_EQ(p.relative_speed, 0) << p.local_rank;
  EXPECT_FALSE(idle[2].straggler);
  std::vector<WorkerProgress> two;
  AddCpuBusyRanks(Busy({200, 300}), 2, kHeartbeat, &two);
  ScoreStragglers(Pointers(two), 2);
  EXPECT_FALSE(two[1].straggler);
  EXPECT_EQ(two[1].relative_speed, 0);
}

TEST(ScoreStragglers, ReportsAndCpu_EachScoredAgainstItsOwnMedian) {
  // Ranks 0-2 report step times; ranks 3-5 (another node's unmodified
  // script) report nothing. A step time and a CPU share are not compared.
  std::vector<WorkerProgress> reports = Ranks({2.0, 2.0, 2.0});
  reports[0].metrics[kStepTimeMetric] = 0.2;
  reports[1].metrics[kStepTimeMetric] = 0.2;
  reports[2].metrics[kStepTimeMetric] = 0.3;
  std::vector<WorkerProgress> measured;
  AddCpuBusyRanks(Busy({900, 900, 1000}), 2, kHeartbeat, &measured);
  std::vector<WorkerProgress*> all = Pointers(reports);
  for (WorkerProgress* p : Pointers(measured)) all.push_back(p);
  ScoreStragglers(all, 2);
  EXPECT_TRUE(reports[2].straggler);
  EXPECT_EQ(reports[2].speed_source, v1::SPEED_SOURCE_STEP_TIME);
  EXPECT_EQ(reports[0].speed_source, v1::SPEED_SOURCE_STEP_TIME);
  for (const WorkerProgress& p : measured) {
    EXPECT_FALSE(p.straggler) << p.local_rank;  // 0.9 of the median: within 1 / 1.25
    EXPECT_EQ(p.speed_source, v1::SPEED_SOURCE_CPU_BUSY);
  }
}

TEST(AddCpuBusyRanks, RankWithAReport_KeepsItsReport) {
  std::vector<WorkerProgress> ranks = Ranks({3.0, 3.0, 3.0});
  ranks.erase(ranks.begin() + 1);  // local rank 1 reports nothing
  ranks[1].generation = 1;         // local rank 2's report is of the last generation
  std::vector<WorkerActivity> workers = Busy({200, 210, 220, 0});
  workers.push_back(WorkerActivity{4, /*running=*/false, std::nullopt, 250});  // exited
  AddCpuBusyRanks(workers, 2, kHeartbeat, &ranks);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[0].local_rank, 0);
  EXPECT_EQ(ranks[0].cpu_busy, 0);  // its report
  EXPECT_DOUBLE_EQ(ranks[0].steps_per_second, 3.0);
  EXPECT_EQ(ranks[1].local_rank, 1);
  EXPECT_DOUBLE_EQ(ranks[1].cpu_busy, 0.21);
  EXPECT_EQ(ranks[2].local_rank, 2);  // the old report gave way
  EXPECT_EQ(ranks[2].generation, 2);
  EXPECT_DOUBLE_EQ(ranks[2].cpu_busy, 0.22);
}

}  // namespace
}  // namespace ddp::rendezvous
