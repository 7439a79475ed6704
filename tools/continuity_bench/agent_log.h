#ifndef DDP_TOOLS_CONTINUITY_BENCH_AGENT_LOG_H_
#define DDP_TOOLS_CONTINUITY_BENCH_AGENT_LOG_H_

// What a ddp-client log (the agent's stderr, with its workers' output teed
// in) says about continuity, for the continuity benchmark: when the agent's
// session resumed or began afresh, when its lease ran out and froze the
// workers, when it thawed them and after how long, which workers started
// (train_ddp.py prints "rank R/W local_rank L restart N generation G" once
// per start) and the last training step rank 0 logged ("step N loss").
//
// The agent's own lines begin with a UTC timestamp (common/logging.h:
// 2026-11-23T00:55:26.123456Z); the workers' lines carry none, so they are
// placed by their order in the file only.
//
// Thread-safety: a pure function over a string.

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ddp::continuity_bench {

struct WorkerStart {
  int rank = -1;
  int world_size = -1;
  int restart = -1;         // TORCHELASTIC_RESTART_COUNT
  int64_t generation = -1;  // DDP_GENERATION
};

struct Thaw {
  absl::Time at;
  absl::Duration frozen_for;  // as the agent measured it
};

struct AgentLogEvents {
  std::vector<absl::Time> resumed;     // "session resumed with the coordinator at"
  std::vector<absl::Time> registered;  // "registered with the coordinator at": a new session
  std::vector<absl::Time> froze;       // "lease of generation G ran out ..."
  std::vector<Thaw> thawed;            // "... thawed the workers (SIGCONT) after D frozen"
  std::vector<WorkerStart> worker_starts;
  int64_t last_step = -1;  // the highest "step N loss"; -1 when none
  int ranks_done = 0;      // "rank R done, params sha256 ..."
};

// Scans `text` (a log, or the part of it written after some offset).
AgentLogEvents ScanAgentLog(absl::string_view text);

// The timestamp a line of common/logging.h begins with; InfinitePast when the
// line has none (a worker's output).
absl::Time LineTime(absl::string_view line);

}  // namespace ddp::continuity_bench

#endif  // DDP_TOOLS_CONTINUITY_BENCH_AGENT_LOG_H_
