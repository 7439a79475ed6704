#ifndef DDP_COORDINATOR_RENDEZVOUS_STRAGGLERS_H_
#define DDP_COORDINATOR_RENDEZVOUS_STRAGGLERS_H_

// Stragglers: the ranks of the running generation that go markedly slower
// than the job's median, from their progress reports (report_progress).
//
// Speed: where every report of the generation carries the metric
// kStepTimeMetric (the seconds a rank spent on its own work in a step, before
// it waits for the others), 1 / that; otherwise steps per second. In
// synchronous data-parallel training every rank completes steps at the same
// rate (each all-reduce waits for the slowest), so there only the step time a
// script reports tells the straggler apart; steps per second tells it in
// loosely coupled work (pipelines, data loaders, independent ranks).
//
// A rank's relative speed is its speed over the median of the generation's
// ranks that have one; it is a straggler when that is below 1 / factor
// (1.25: a quarter slower than the median). Fewer than three ranks with a
// speed: nobody is flagged (a median of two says nothing of which is slow).
//
// Thread-safety: a pure function.

#include <vector>

#include "coordinator/rendezvous/job_types.h"

namespace ddp::rendezvous {

inline constexpr char kStepTimeMetric[] = "step_time_s";
inline constexpr double kDefaultStragglerFactor = 1.25;

// Sets relative_speed and straggler on every report of generation
// `generation` in `reports` (others are left at 0 / false).
void ScoreStragglers(const std::vector<WorkerProgress*>& reports, Generation generation,
                     double factor = kDefaultStragglerFactor);

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_STRAGGLERS_H_
