#ifndef DDP_TOOLS_RDZV_SIM_RDZV_SCENARIO_H_
#define DDP_TOOLS_RDZV_SIM_RDZV_SCENARIO_H_

// One benchmark run per cluster size, each on its own job:
//   1. (own coordinator) start a fresh coordinator on a fresh data dir;
//      read its idle VmRSS after `settle`;
//   2. rendezvous: N agents register; first Register -> last Assignment;
//   3. restart: one agent reports a worker exit -> last next-generation
//      Assignment (the agents confirm StopWorkers at once);
//   4. steady heartbeating for `heartbeat_window`, from two heartbeat
//      intervals after the restart (the agents' first heartbeats of the new
//      generation, with their workers' states, fall before): coordinator and
//      simulator CPU from /proc, coordinator VmRSS with all N connected;
//   5. CancelJob, streams closed, coordinator stopped.
// Without a coordinator pid (external coordinator, no --coordinator-pid),
// the CPU and memory columns stay empty.
//
// Possible errors: none returned; a failed step is reported in
// SizeResult::error with the status text, and the later steps are skipped.
// Thread-safety: not thread-safe; one driver thread.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tools/rdzv_sim/report.h"

namespace ddp::rdzv_sim {

struct ScenarioOptions {
  // External coordinator: host:port, optionally its pid on this machine.
  std::string coordinator_target;
  pid_t coordinator_pid = 0;
  // Own coordinator (used when coordinator_target is empty).
  std::string coordinator_binary;
  std::vector<std::string> coordinator_args;
  std::string work_root = "/tmp";

  int channels = 64;
  int completion_queues = 0;  // the streams' (GrpcSimFleet); 0: SimCompletionQueues(nodes)
  absl::Duration keepalive;   // HTTP/2 pings per connection (GrpcSimFleet); 0: none
  int heartbeat_threads = 4;
  int nproc = 8;
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  absl::Duration heartbeat_timeout = absl::Seconds(3);
  absl::Duration heartbeat_window = absl::Seconds(10);
  absl::Duration phase_timeout = absl::Seconds(60);
  absl::Duration settle = absl::Milliseconds(500);
  uint64_t seed = 1;
  // Heartbeats ask for a HeartbeatAck (the lease), as ddp-client's do.
  bool ack_heartbeats = true;
};

SizeResult RunScenario(const ScenarioOptions& options, int nodes);

// The simulator's completion queues for `nodes` agents when none are asked
// for: one per 2,048 nodes, at least 4, at most 64 (Debian's libgrpc scans a
// queue's pending operations on each of its completions; the coordinator's
// session queues keep about as many streams each: 8 queues at 16,384 agents,
// 32 at 65,536).
int SimCompletionQueues(int nodes);

}  // namespace ddp::rdzv_sim

#endif  // DDP_TOOLS_RDZV_SIM_RDZV_SCENARIO_H_
