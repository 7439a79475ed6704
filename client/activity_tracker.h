#ifndef DDP_CLIENT_ACTIVITY_TRACKER_H_
#define DDP_CLIENT_ACTIVITY_TRACKER_H_

// Decides whether a worker that says nothing about its progress (an
// unmodified script: no heartbeat file touched, no progress reported) has
// stopped making any, from successive samples of its process group
// (common/proc_stats.h: the worker and the children in its group, such as
// data-loader workers). Between two samples the group was active when any of
// these holds:
//   - it used more than `min_cpu_share` of one core (a training step, a
//     torch.load deserializing, data-loader workers preparing batches);
//   - it read or wrote bytes (files, sockets, pipes: a checkpoint load from
//     disk, a download, logging);
//   - one of its processes is in uninterruptible wait (state D: disk I/O).
// Measured here: a PyTorch worker asleep in its step, and its peers blocked in
// a gloo all_reduce, use about 0.3 % of a core (a 10 ms tick every 3 s) and
// move no bytes.
//
// A worker is judged only once its group has used `cpu_before_judged` of CPU
// in all (importing torch takes more than 1 s): a process that never worked
// is waiting to begin (a wrapper, a helper that sleeps), not stalled. Once
// judged, `hang_timeout` without activity is a hang. The caller decides what
// a node-wide hang is (worker_supervisor.h: only while no worker of the node
// is active). A zero hang_timeout disables the check.
//
// Thread-safety: not thread-safe; owned by the supervisor's event loop.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "common/proc_stats.h"

namespace ddp::client {

// "no CPU or I/O for 10.4 s": how long an idle worker did nothing, in the
// words of every failure report and summary.
std::string DescribeIdleness(absl::Duration idle_for);

// ddp-client --hang-timeout's default: a worker group with no CPU and no I/O
// for this long is hung.
inline constexpr absl::Duration kDefaultHangTimeout = absl::Seconds(10);

class ActivityTracker {
 public:
  struct Options {
    absl::Duration hang_timeout = kDefaultHangTimeout;  // zero: never hung
    double min_cpu_share = 0.05;                        // of one core
    absl::Duration cpu_before_judged = absl::Seconds(1);
  };
  explicit ActivityTracker(Options options) : options_(options) {}

  // The group's sample at `now` (nullopt: no process of the group was found,
  // which tells nothing: the exit is reported by the supervisor).
  void Observe(const std::optional<ProcessGroupSample>& sample, absl::Time now);

  // Used cpu_before_judged of CPU so far.
  bool judged() const { return judged_; }
  // When it was last seen active (the first sample counts as active); unset
  // before the first sample.
  std::optional<absl::Time> last_active() const { return last_active_; }
  absl::Duration IdleFor(absl::Time now) const;
  // Judged, and idle for more than hang_timeout at `now`.
  bool Hung(absl::Time now) const;
  // The worker was frozen (SIGSTOP by the agent's lease) for `paused`: an
  // idleness it did not choose. The last activity moves that much later and
  // the next sample only sets the baseline.
  void Forgive(absl::Duration paused);

 private:
  const Options options_;
  std::optional<absl::Time> last_sampled_;
  absl::Duration last_cpu_;
  int64_t last_io_bytes_ = 0;
  std::optional<absl::Time> last_active_;
  bool judged_ = false;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_ACTIVITY_TRACKER_H_
