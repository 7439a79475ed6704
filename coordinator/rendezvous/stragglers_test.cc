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

}  // namespace
}  // namespace ddp::rendezvous
