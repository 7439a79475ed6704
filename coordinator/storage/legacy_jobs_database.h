#ifndef DDP_COORDINATOR_STORAGE_LEGACY_JOBS_DATABASE_H_
#define DDP_COORDINATOR_STORAGE_LEGACY_JOBS_DATABASE_H_

// The reader of DATA_DIR/jobs.db as the releases before the single database
// wrote it (schema versions 1-5: a 35-column jobs table, failures, exclusions,
// nodes and past runs in tables of their own). Only SqliteStateStore's import
// reads it (sqlite_state_store.h); nothing writes it any more.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/storage/sqlite_database.h"

namespace ddp::storage {

// Every job of the file at `path` (sorted by job id) with its nodes (sorted by
// node id) and past runs. A file of an older version is upgraded in place
// first. Possible errors: FAILED_PRECONDITION (no such file, unreadable),
// DATA_LOSS (not a database, corrupt, or rows that contradict each other:
// the message names them), UNAVAILABLE (I/O error).
absl::StatusOr<std::vector<rendezvous::JobSnapshot>> ReadLegacyJobsDatabase(
    const std::string& path);

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_LEGACY_JOBS_DATABASE_H_
