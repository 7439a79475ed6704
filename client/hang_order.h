#ifndef DDP_CLIENT_HANG_ORDER_H_
#define DDP_CLIENT_HANG_ORDER_H_

// Which of several workers found hung in one heartbeat check is to blame.
// When one worker stops making progress, its peers block in the next
// collective and stop touching their heartbeat files too, a moment later: the
// worker that went silent first is the likely culprit, the others are
// knock-on hangs.
//
// Thread-safety: pure function.

#include <cstddef>
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
};

// Sorts `hung` oldest heartbeat first: by last_touch, then last_mtime, then
// the lower global rank.
void OrderByLastHeartbeat(std::vector<HungWorker>& hung);

}  // namespace ddp::client

#endif  // DDP_CLIENT_HANG_ORDER_H_
