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
// A worker's start (`import torch`, the process group's set-up: CPU-bound,
// and over at a different moment on each rank) must not be measured as its
// work, or it would tell apart ranks that are alike. Two rules keep it out:
//   - two sample intervals whose share is more than Options::max_step_ratio
//     times (or less than 1 / that) the share of the window before them start
//     the window again from there (the start is over: a new phase), and
//     nothing is reported until that window is whole (a start longer than a
//     window was measured as such: its value must not outlive it); a jump
//     over the last interval alone holds the report back for a sample;
//   - a window is reported only when its two halves agree within
//     Options::max_halves_difference (a change under way, or a start that
//     differed less than the ratio, is still in it); the value reported before
//     stays meanwhile.
// So a worker's first value comes about a window after its start ended, and a
// change shows within the window (plus two samples) after it happened. Steps so
// long that a second or a half window holds few of them (over about 1 s with
// the 5 s window) make the shares jump: such workers are rarely or never
// reported.
//
// What is reported moves only when the measurement moved by more than
// Options::min_change_permille and more than Options::min_change_share of the
// value reported (the window's own jitter, with steps of a fraction of a
// second, is a few per cent), so that a steady worker's state, and with it
// the heartbeat, stays the same.
//
// Thread-safety: not thread-safe; owned by the supervisor's event loop.

#include <cstddef>
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
    double max_step_ratio = 2;
    // Of the larger half's share.
    double max_halves_difference = 0.3;
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
  // span a whole window, and again for a window after a new phase began.
  int reported_permille() const { return reported_permille_; }

 private:
  // Whether the share from samples_[index] to (group_cpu, now) is more than
  // max_step_ratio times, or less than 1 / that, the share before it.
  bool JumpedSince(size_t index, absl::Duration group_cpu, absl::Time now) const;

  const Options options_;
  std::deque<std::pair<absl::Time, absl::Duration>> samples_;  // oldest first
  int reported_permille_ = 0;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_CPU_BUSY_WINDOW_H_
