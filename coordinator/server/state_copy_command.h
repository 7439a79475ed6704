#ifndef DDP_COORDINATOR_SERVER_STATE_COPY_COMMAND_H_
#define DDP_COORDINATOR_SERVER_STATE_COPY_COMMAND_H_

// `coordinator --data-dir DIR --copy-state-to etcd://...`: moves a site from
// SQLite to etcd. Opens DIR as a coordinator would (its LOCK, so no
// coordinator may run on it; the identity checks; an earlier release's
// jobs.db imported) and copies its state into the etcd prefix, which must be
// empty (storage/state_copy.h says what is copied).
//
// Possible errors: NOT_FOUND (DIR has no coordinator.db: nothing to copy),
// FAILED_PRECONDITION (DIR locked by a running coordinator, or the prefix is
// not empty), INVALID_ARGUMENT (a bad store value), UNAVAILABLE (etcd
// unreachable), those of the stores.

#include <string>

#include "absl/status/statusor.h"
#include "coordinator/storage/state_copy.h"

namespace ddp::server {

absl::StatusOr<storage::StateCopySummary> CopyDataDirToStore(const std::string& data_dir,
                                                             const std::string& store);

}  // namespace ddp::server

#endif  // DDP_COORDINATOR_SERVER_STATE_COPY_COMMAND_H_
