#include "coordinator/rendezvous/stragglers.h"

#include <algorithm>
#include <functional>

namespace ddp::rendezvous {
namespace {

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// Scores `ranks` against the median of their speeds (speed_of; <= 0: none).
void ScoreAgainstMedian(const std::vector<WorkerProgress*>& ranks,
                        const std::function<double(const WorkerProgress&)>& speed_of,
                        v1::SpeedSource source, double factor) {
  std::vector<double> speeds;
  for (const WorkerProgress* p : ranks) {
    if (speed_of(*p) > 0) speeds.push_back(speed_of(*p));
  }
  if (speeds.size() < 3) return;
  const double median = Median(std::move(speeds));
  for (WorkerProgress* p : ranks) {
    const double speed = speed_of(*p);
    if (speed <= 0) continue;
    p->relative_speed = speed / median;
    p->straggler = p->relative_speed < 1.0 / factor;
    p->speed_source = source;
  }
}

}  // namespace

void AddCpuBusyRanks(const std::vector<WorkerActivity>& workers, Generation generation,
                     absl::Time as_of, std::vector<WorkerProgress>* ranks) {
  for (const WorkerActivity& w : workers) {
    if (!w.running || w.cpu_busy_permille <= 0) continue;
    auto reported = std::find_if(ranks->begin(), ranks->end(), [&](const WorkerProgress& p) {
      return p.local_rank == w.local_rank;
    });
    if (reported != ranks->end() && reported->generation == generation) continue;
    WorkerProgress measured;
    measured.local_rank = w.local_rank;
    measured.generation = generation;
    measured.reported = as_of;
    measured.cpu_busy = w.cpu_busy_permille / 1000.0;
    if (reported != ranks->end()) {
      *reported = std::move(measured);
    } else {
      ranks->push_back(std::move(measured));
    }
  }
  std::sort(ranks->begin(), ranks->end(), [](const WorkerProgress& a, const WorkerProgress& b) {
    return a.local_rank < b.local_rank;
  });
}

void ScoreStragglers(const std::vector<WorkerProgress*>& ranks, Generation generation,
                     double factor) {
  std::vector<WorkerProgress*> reported;
  std::vector<WorkerProgress*> measured;
  bool all_timed = true;
  for (WorkerProgress* p : ranks) {
    p->relative_speed = 0;
    p->straggler = false;
    p->speed_source = v1::SPEED_SOURCE_UNSPECIFIED;
    if (p->generation != generation) continue;
    if (p->cpu_busy > 0) {
      measured.push_back(p);
      continue;
    }
    reported.push_back(p);
    auto it = p->metrics.find(kStepTimeMetric);
    all_timed = all_timed && it != p->metrics.end() && it->second > 0;
  }
  if (all_timed) {
    ScoreAgainstMedian(
        reported, [](const WorkerProgress& p) { return 1.0 / p.metrics.at(kStepTimeMetric); },
        v1::SPEED_SOURCE_STEP_TIME, factor);
  } else {
    ScoreAgainstMedian(
        reported, [](const WorkerProgress& p) { return p.steps_per_second; },
        v1::SPEED_SOURCE_STEP_RATE, factor);
  }
  std::vector<double> busy;
  for (const WorkerProgress* p : measured) busy.push_back(p->cpu_busy);
  if (busy.empty() || Median(std::move(busy)) < kMinCpuBusyToScore) return;
  ScoreAgainstMedian(
      measured, [](const WorkerProgress& p) { return 1.0 / p.cpu_busy; }, v1::SPEED_SOURCE_CPU_BUSY,
      factor);
}

}  // namespace ddp::rendezvous
