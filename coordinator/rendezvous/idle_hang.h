#ifndef DDP_COORDINATOR_RENDEZVOUS_IDLE_HANG_H_
#define DDP_COORDINATOR_RENDEZVOUS_IDLE_HANG_H_

// Hangs of scripts that say nothing of their progress, judged job-wide.
//
// Each agent samples its workers' process groups (CPU, I/O bytes, disk wait:
// client/activity_tracker.h) and reports in its heartbeats which workers are
// idle and for how long (session.proto WorkerState.idle_ms). One node idle
// is not a hang: while rank 0 saves a checkpoint alone, every rank of the
// other nodes waits in a barrier or an all_reduce and uses no CPU. The job
// hangs when EVERY member node of the generation is idle (all its running
// workers idle) and the last of them went idle more than hang_timeout ago:
// nobody is left working for the others to wait on.
//
// Who is named: the rank the others were waiting for when the job stalled.
// The stall began when the last worker went idle; the workers that went idle
// within kSameStallWindow before it stopped in the same event (in the usual
// hang a rank stops, in a sleep, a deadlock or a collective that never
// returns, and its peers block in the next collective a moment later), and
// the FIRST of them is named: the one that stopped while the others went on
// to wait for it. Workers idle for longer (a node that waited in a barrier
// while rank 0 saved a checkpoint alone, and then rank 0 stopped) were
// waiting already and are not named. Agents sample once a second, so ranks
// that stopped within the same second tie; the tie goes to the lowest global
// rank, and the stacks taken at the hang (`ddpctl jobs stacks JOB
// --at-hang`) show which rank is elsewhere.
//
// Detection bound: the hang is declared at the first check (every
// heartbeat_interval) more than hang_timeout after the last activity was
// sampled (at most 1 s after it happened). The agent reports a worker idle
// after 2 s without activity (one heartbeat interval later at most), which
// is before hang_timeout (>= 2 s) ends except with the least timeouts. The
// date is taken at the coordinator as (receipt - idle_ms): late by the
// heartbeat's transit, so a hang may be declared that much late, never
// early. With the defaults (10 s, 500 ms heartbeats): at most ~11.5 s after
// the last activity, plus the transit.
//
// Thread-safety: plain values; not thread-safe (Job owns them).

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ddp::rendezvous {

// One worker as a heartbeat reported it.
struct WorkerActivity {
  int local_rank = 0;
  // Not exited (starting or running); exited workers neither work nor wait.
  bool running = true;
  // When it went idle, on the coordinator's clock; unset: active (or not
  // judged yet, or judged by its heartbeat file).
  std::optional<absl::Time> idle_since;
  // Its process group's CPU time per wall second over the agent's last
  // seconds, in per-mille of one core; 0: not measured (stragglers.h scores
  // ranks without progress reports from it).
  int cpu_busy_permille = 0;
};

// The bound of WorkerActivity::cpu_busy_permille: 1024 cores busy.
inline constexpr int kMaxCpuBusyPermille = 1024 * 1000;

// The idleness of one member node's workers in the current generation.
class NodeIdleness {
 public:
  // The full list of the node's workers from a heartbeat that carried its
  // worker states. A worker that was idle and is still idle keeps its earlier
  // date (the agent repeats an idle worker's first idle_ms, which dated now
  // would move the start later).
  void Update(std::vector<WorkerActivity> workers);
  // A new generation: nothing known.
  void Reset() { workers_.clear(); }

  // When the node's last running worker went idle: set only when at least
  // one worker runs and every running worker is idle.
  std::optional<absl::Time> AllIdleSince() const;
  // By local rank, as last reported.
  const std::vector<WorkerActivity>& workers() const { return workers_; }

 private:
  std::vector<WorkerActivity> workers_;  // by local rank
};

// A member node of the generation as the rule sees it.
struct MemberIdleness {
  std::string node_id;
  int64_t global_rank_offset = 0;
  const NodeIdleness* idleness = nullptr;
};

// Idle starts this close to the last one belong to the same stall.
inline constexpr absl::Duration kSameStallWindow = absl::Seconds(3);

// A job-wide hang: who is named, and since when every member was idle.
struct IdleHang {
  std::string node_id;
  int local_rank = 0;
  int64_t global_rank = 0;
  absl::Time idle_since;      // of that worker
  absl::Time all_idle_since;  // when the last member went idle
};

// The rule above: a hang when hang_timeout > 0, there is at least one
// member, and every member's AllIdleSince() is more than hang_timeout before
// `now`; it names the first worker idle within kSameStallWindow of the last.
// Members that finished (every worker exited 0) are left out by the caller.
std::optional<IdleHang> FindIdleHang(const std::vector<MemberIdleness>& members,
                                     absl::Duration hang_timeout, absl::Time now);

// "hang: no CPU or I/O for 10.1 s on any rank of the job; rank 1 (node 'a')
// stopped first, 10.3 s ago".
std::string DescribeIdleHang(const IdleHang& hang, absl::Time now);

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_IDLE_HANG_H_
