#ifndef DDP_COORDINATOR_STORAGE_SQLITE_JOB_TABLES_H_
#define DDP_COORDINATOR_STORAGE_SQLITE_JOB_TABLES_H_

// The job tables of the state database (DATA_DIR/coordinator.db): one
// serialized record per row (storage/job_record_codec.h), written inside the
// transaction of the commit that carries them (SqliteStateStore).
//
//   jobs       job_id -> JobRecord, plus its counters (last_event_index,
//              next_join_seq) as columns: most joins change only those
//   job_nodes  (job_id, node_id) -> NodeRecord
//   job_runs   (job_id, run) -> JobRecord of a finished run a later run
//              replaced (without exclusions and nodes)
//   job_events (job_id, event_index) -> JobEventRecord: the retained events
//              of the current run (schema version 4)
//   job_event_counts (type, cause) -> count: every event ever appended
//              (version 4)
//
// Ids are BLOBs: arbitrary bytes round-trip and sort bytewise.
//
// Thread-safety: functions over a connection the caller owns and guards.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/storage/sqlite_database.h"

namespace ddp::storage {

// The schema step that creates the job tables.
extern const char kJobTablesSchema[];
// The schema step that adds the event tables to a file with the job tables.
extern const char kJobEventTablesSchema[];

// Applies `changes` inside the caller's open transaction. Possible errors:
// INVALID_ARGUMENT (node changes or counters for a job without a record, a
// record of another job), and SQLite's.
absl::Status WriteJobChanges(SqliteDatabase& db, const rendezvous::JobChanges& changes);

// Stores `run` as a past run of its job (inside the caller's transaction).
absl::Status WritePastRun(SqliteDatabase& db, const rendezvous::JobRecord& run);

// Adds `counts` to the stored event counts (inside the caller's transaction).
absl::Status AddEventCounts(SqliteDatabase& db, const rendezvous::JobEventCounts& counts);

// The stored event counts. Possible errors: DATA_LOSS (an unknown type or
// cause), and SQLite's.
absl::StatusOr<rendezvous::JobEventCounts> ReadEventCounts(SqliteDatabase& db);

// Every stored job, by job id, with its nodes, past runs (run order) and
// events (index order); read in one transaction. Possible errors: DATA_LOSS (a record that does not
// decode, rows of a job without a record), and SQLite's.
absl::StatusOr<std::vector<rendezvous::JobSnapshot>> ReadJobSnapshots(SqliteDatabase& db);

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_SQLITE_JOB_TABLES_H_
