#ifndef DDP_CLIENT_HANG_ORDER_H_
#define DDP_CLIENT_HANG_ORDER_H_

// Which of several workers found hung in one heartbeat check is to blame.
// When one worker stops making progress, its peers block in the next
// collective and stop touching their heartbeat files too, a moment later. The
// heartbeat times alone cannot tell them apart (the peers touched their files
// at the start of the same step, milliseconds apart), so the process itself
// is the first evidence:
//   1. stopped (state T or t: SIGSTOP, a debugger): it cannot be a victim;
//   2. in uninterruptible wait (state D: stuck in the kernel, I/O);
//   3. burning CPU without heartbeats (a loop that never reaches the next
//      step), where blocked peers sleep in the collective;
//   4. the rest;
// then the oldest heartbeat, then the lower global rank.
//
// Thread-safety: pure function.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ddp::client {

struct HungWorker {
  size_t index = 0;  // the caller's handle (the supervisor's worker index)
  int global_rank = 0;
  // When the supervisor saw the last touch (its clock; the check interval is
  // its resolution) and the file's mtime then (finer, and comparable between
  // the workers of one node: one file system).
  absl::Time last_touch;
  absl::Time last_mtime;
  // From /proc/PID/stat at the check ('?' when unknown) and whether its CPU
  // time grew since the previous check.
  char process_state = '?';
  bool cpu_progress = false;
};

// The evidence class above (1 strongest .. 4), and a phrase for messages
// ("process stopped (state T)"), empty for class 4.
int HangEvidenceClass(const HungWorker& worker);
std::string HangEvidence(const HungWorker& worker);

// Sorts `hung` most suspicious first (see the file comment).
void OrderHungWorkers(std::vector<HungWorker>& hung);

}  // namespace ddp::client

#endif  // DDP_CLIENT_HANG_ORDER_H_
