#ifndef DDP_COORDINATOR_RENDEZVOUS_STRAGGLERS_H_
#define DDP_COORDINATOR_RENDEZVOUS_STRAGGLERS_H_

// Stragglers: the ranks of the running generation that go markedly slower
// than the job's median. A rank's speed comes from one of two sources, and
// the ranks of each source are scored against each other only (their speeds
// are in different units):
//
// From its progress reports (report_progress; v1::SPEED_SOURCE_STEP_TIME or
// _STEP_RATE). Where every report of the generation carries the metric
// kStepTimeMetric (the seconds a rank spent on its own work in a step, before
// it waits for the others), 1 / that; otherwise steps per second. In
// synchronous data-parallel training every rank completes steps at the same
// rate (each all-reduce waits for the slowest), so there only the step time a
// script reports tells the straggler apart; steps per second tells it in
// loosely coupled work (pipelines, data loaders, independent ranks).
//
// From its CPU, for a running rank that made no report in the generation (an
// unmodified script; v1::SPEED_SOURCE_CPU_BUSY): 1 / the share of one core
// its process group used over its agent's last 5 s
// (WorkerActivity::cpu_busy_permille, client/cpu_busy_window.h). In
// synchronous data-parallel CPU training (gloo) a rank's own work is CPU time
// and its wait for the others in the collective is blocked time, so the rank
// with more work per step keeps the CPU busier by as much. Blind to what is
// not CPU: GPU work (the CPU thread spins in a CUDA synchronize, NCCL spins:
// every rank looks equally busy) and a rank slow because it sleeps or waits on
// I/O (it looks less busy, not slower). Nobody is scored while the median
// share is below kMinCpuBusyToScore (an idle job, one waiting on I/O: the
// shares are noise). A rank that became slower is flagged within the agent's
// window (5 s) and two samples (2 s) after the change, plus a heartbeat; at
// start, about a window after its start (`import torch`) ended: the agent
// reports nothing of a window that holds a change (cpu_busy_window.h).
//
// A rank's relative speed is its speed over the median of its source's ranks
// that have one; it is a straggler when that is below 1 / factor (1.25: a
// quarter slower than the median). Fewer than three ranks with a speed of a
// source: none of them is flagged (a median of two says nothing of which is
// slow).
//
// Thread-safety: pure functions.

#include <vector>

#include "absl/time/time.h"
#include "coordinator/rendezvous/idle_hang.h"
#include "coordinator/rendezvous/job_types.h"

namespace ddp::rendezvous {

inline constexpr char kStepTimeMetric[] = "step_time_s";
inline constexpr double kDefaultStragglerFactor = 1.25;
// Of one core: 2 %. An idle PyTorch worker (asleep, or blocked in a gloo
// collective) uses about 0.3 %.
inline constexpr double kMinCpuBusyToScore = 0.02;

// Adds to `ranks` (one node's progress reports) an entry for each running
// worker of `workers` (its agent's last worker states) with a measured CPU
// busy share and no report of `generation`: local_rank, generation, cpu_busy
// and `as_of` (the node's last heartbeat) as its date; it takes the place of
// a report of an earlier generation. Keeps `ranks` in local rank order.
void AddCpuBusyRanks(const std::vector<WorkerActivity>& workers, Generation generation,
                     absl::Time as_of, std::vector<WorkerProgress>* ranks);

// Sets relative_speed, straggler and speed_source on every entry of
// generation `generation` in `ranks` (others are left at 0 / false /
// unspecified): entries with cpu_busy > 0 from that, the others from their
// reports.
void ScoreStragglers(const std::vector<WorkerProgress*>& ranks, Generation generation,
                     double factor = kDefaultStragglerFactor);

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_STRAGGLERS_H_
