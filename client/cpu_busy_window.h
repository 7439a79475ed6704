#ifndef DDP_CLIENT_CPU_BUSY_WINDOW_H_
#define DDP_CLIENT_CPU_BUSY_WINDOW_H_

// How busy a worker keeps the CPU: its process group's CPU time over the last
// `window` of wall time, per wall second (1000 per-mille: one core busy the
// whole time), from the samples the supervisor takes of it every second
// (common/proc_stats.h, the same as ActivityTracker's). The agent reports it
// (session.proto WorkerState.cpu_busy_permille) so that the coordinator can
// score the ranks of a script that reports no step times
// (coordinator/rendezvous/stragglers.h): in synchronous data-parallel CPU
// training a rank's own work is CPU time and its wait for the others in the
// collective is blocked time, so its busy share is proportional to its own
// work per step.
//
// What is reported moves only when the measurement moved by more than
// Options::min_change_permille and more than Options::min_change_share of the
// value reported (the window's own jitter, with steps of a fraction of a
// second, is a few per cent), so that a steady worker's state, and with it
// the heartbeat, stays the same.
//
// Thread-safety: not thread-safe; owned by the supervisor's event loop.

#include <deque>
#include <utility>

#include "absl/time/time.h"

namespace ddp::client {

inline constexpr absl::Duration kDefaultCpuBusyWindow = absl::Seconds(5);

class CpuBusyWindow {
 public:
  struct Options {
    absl::Duration window = kDefaultCpuBusyWindow;
    int min_change_permille = 5;
    double min_change_share = 0.05;
  };
  explicit CpuBusyWindow(Options options) : options_(options) {}

  // The group's CPU time so far (children it reaped included) at `now`.
  // Totals that shrink (a child's time that left the count) start the window
  // again.
  void Observe(absl::Duration group_cpu, absl::Time now);
  // The counters did not move for a while the worker could not run (frozen by
  // the agent's lease): the window starts again at the next sample; the value
  // reported stays until a full window measures a new one.
  void Restart() { samples_.clear(); }

  // Per-mille of one core over the last window (more than 1000 with several
  // busy threads or processes), at least 1 once measured; 0 until the samples
  // span a whole window.
  int reported_permille() const { return reported_permille_; }

 private:
  const Options options_;
  std::deque<std::pair<absl::Time, absl::Duration>> samples_;  // oldest first
  int reported_permille_ = 0;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_CPU_BUSY_WINDOW_H_
