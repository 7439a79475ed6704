#include "coordinator/rendezvous/stragglers.h"

#include <algorithm>

namespace ddp::rendezvous {

void ScoreStragglers(const std::vector<WorkerProgress*>& reports, Generation generation,
                     double factor) {
  std::vector<WorkerProgress*> current;
  bool all_timed = true;
  for (WorkerProgress* p : reports) {
    p->relative_speed = 0;
    p->straggler = false;
    if (p->generation != generation) continue;
    current.push_back(p);
    auto it = p->metrics.find(kStepTimeMetric);
    all_timed = all_timed && it != p->metrics.end() && it->second > 0;
  }
  auto speed_of = [all_timed](const WorkerProgress& p) {
    return all_timed ? 1.0 / p.metrics.at(kStepTimeMetric) : p.steps_per_second;
  };
  std::vector<double> speeds;
  for (const WorkerProgress* p : current) {
    if (speed_of(*p) > 0) speeds.push_back(speed_of(*p));
  }
  if (speeds.size() < 3) return;
  std::sort(speeds.begin(), speeds.end());
  const size_t mid = speeds.size() / 2;
  const double median = speeds.size() % 2 == 1 ? speeds[mid] : (speeds[mid - 1] + speeds[mid]) / 2;
  for (WorkerProgress* p : current) {
    const double speed = speed_of(*p);
    if (speed <= 0) continue;
    p->relative_speed = speed / median;
    p->straggler = p->relative_speed < 1.0 / factor;
  }
}

}  // namespace ddp::rendezvous
