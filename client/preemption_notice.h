#ifndef DDP_CLIENT_PREEMPTION_NOTICE_H_
#define DDP_CLIENT_PREEMPTION_NOTICE_H_

// The files of a drain or preemption between the agent and its workers
// (docs/worker-contract.md, "Preemption notice"):
//
//   DDP_PREEMPTION_NOTICE_FILE  RUN_DIR/preemption_notice.json, one per node:
//                               the agent writes it when a node of the job
//                               will leave (JSON: node_id, leave_at_unix_ms,
//                               reason, generation) and removes it when the
//                               next generation starts;
//                               ddp_coordinator.preemption_pending() is true
//                               while it exists.
//   DDP_PREEMPTION_READY_FILE   per worker and generation: the worker's
//                               ddp_coordinator.ready_to_leave() creates it
//                               once its checkpoint is written; when every
//                               local worker's exists the agent tells the
//                               coordinator (ReadyToLeave).
//
// And the cloud's notice (--preemption-notice-file PATH): a file some other
// agent on the machine creates when the machine is about to be reclaimed.
//
// Thread-safety: pure functions over the file system.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ddp::client {

struct PreemptionNotice {
  std::string node_id;  // the node that leaves (perhaps another one)
  absl::Time leaves_at;
  std::string reason;
  int64_t generation = 0;
};

// Writes `notice` to `path` as JSON, atomically (a temporary file renamed).
// Possible errors: INTERNAL naming the path and errno text.
absl::Status WritePreemptionNotice(const std::string& path, const PreemptionNotice& notice);

// True when every file of `ready_files` exists (false for an empty list).
bool AllReadyToLeave(const std::vector<std::string>& ready_files);

// The longest grace a cloud notice file may state (a larger number is taken
// as this).
inline constexpr absl::Duration kMaxCloudNoticeGrace = absl::Hours(24);

// The cloud's notice at `path`: nullopt while the file does not exist;
// otherwise how long the node has left: the file's content when it is a whole
// number of seconds (0 to kMaxCloudNoticeGrace), else `fallback` (an empty
// file, or the cloud's own format).
std::optional<absl::Duration> ReadCloudNotice(const std::string& path, absl::Duration fallback);

}  // namespace ddp::client

#endif  // DDP_CLIENT_PREEMPTION_NOTICE_H_
