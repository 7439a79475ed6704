#ifndef DDP_TOOLS_RDZV_SIM_HEARTBEAT_PACER_H_
#define DDP_TOOLS_RDZV_SIM_HEARTBEAT_PACER_H_

// Spreads the heartbeats of a slice of agents evenly over each interval, the
// way independent agents would (not all at the same instant): after `t` since
// Start, floor(t / interval * agents) heartbeats are owed in all, taken
// round-robin over the slice. A caller that fell behind by more than one
// interval gets one round at most (the backlog is dropped, as a real agent's
// timer would not fire twice).
//
// Thread-safety: not thread-safe; one pacing thread owns it.

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace ddp::rdzv_sim {

// How far the simulator's own heartbeating fell behind (so that a node the
// coordinator declares lost can be told apart from a simulator too starved
// to send): the longest time between two pacing rounds of one pacing thread
// (they are `pacer_tick` apart when on time), the heartbeats that a pacer
// skipped because it fell more than one interval behind, and the stream
// heartbeats not sent because the agent's previous one was still queued.
struct SimPacing {
  absl::Duration longest_pause;
  int64_t skipped = 0;
  int64_t dropped_while_queued = 0;
};

class HeartbeatPacer {
 public:
  // `agents` >= 1, `interval` > 0.
  HeartbeatPacer(int agents, absl::Duration interval, absl::Time start);

  // Appends to `due` the slice-local indices (0..agents-1) of the agents
  // whose heartbeat is owed at `now`.
  void TakeDue(absl::Time now, std::vector<int>* due);

  int64_t owed_total() const { return taken_; }
  // Owed heartbeats that were dropped as a backlog: the caller fell more than
  // one interval behind (the simulator, not the coordinator, was late).
  int64_t skipped() const { return skipped_; }

 private:
  const int agents_;
  const absl::Duration interval_;
  const absl::Time start_;
  int64_t taken_ = 0;
  int64_t skipped_ = 0;
  int next_ = 0;
};

}  // namespace ddp::rdzv_sim

#endif  // DDP_TOOLS_RDZV_SIM_HEARTBEAT_PACER_H_
