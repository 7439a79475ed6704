#ifndef DDP_COORDINATOR_STORAGE_STATE_COPY_H_
#define DDP_COORDINATOR_STORAGE_STATE_COPY_H_

// Copies a coordinator's whole durable state from one StateStore to another
// (a site moving from SQLite to etcd: `coordinator --copy-state-to`).
//
// What is copied, in ONE batch (one transaction of the target: all or
// nothing): every live key with its revisions and version, every lease (a
// full TTL again on load, as after any restart), the next lease id, the store
// revision, and every job with its nodes, past runs and retained events (so a
// WatchJob resumes from the index it had). What is not: the KV watch history,
// and the job event counts beyond the copied events (the target counts what it
// was given: the metrics' counters start again from there). The target is
// compacted to the copied revision, so a KV watch resumed from an older
// revision gets OUT_OF_RANGE (range, then watch again), never a silent gap.
//
// The target must be empty. A target left by a copy that stopped between its
// batch and its compaction (same revision, not yet compacted) is finished.
//
// Possible errors: FAILED_PRECONDITION (the target holds other state: it is
// named, nothing written), whatever the stores return (a target's UNKNOWN
// keeps its meaning: run the copy again, it finishes or refuses).
// Thread-safety: the caller owns both stores; nothing else may use them.

#include <cstdint>

#include "absl/status/statusor.h"
#include "coordinator/commit/state_store.h"

namespace ddp::storage {

struct StateCopySummary {
  int64_t revision = 0;
  int64_t keys = 0;
  int64_t leases = 0;
  int64_t jobs = 0;
  int64_t past_runs = 0;
  int64_t nodes = 0;
  int64_t events = 0;  // job events
  // The target already held this copy; only its compaction was missing.
  bool finished_earlier_copy = false;
};

absl::StatusOr<StateCopySummary> CopyState(commit::StateStore& from, commit::StateStore& to);

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_STATE_COPY_H_
