#ifndef DDP_COORDINATOR_STORAGE_SQLITE_SNAPSHOT_H_
#define DDP_COORDINATOR_STORAGE_SQLITE_SNAPSHOT_H_

// A consistent copy of the coordinator's SQLite database while it serves
// (ddpctl snapshot save): `VACUUM INTO` on a connection of its own, one read
// transaction, so the copy is the database as of the last commit before the
// copy began (WAL: the writer is not blocked), compacted, with no -wal of its
// own. It carries the data dir's identity: restore it as DIR/coordinator.db in
// an empty DIR and start `coordinator --data-dir DIR` (key rows not yet
// written to the key table are replayed from the events at open, as after a
// crash).
//
// Thread-safety: any thread; the copy has its own connection.

#include <string>

#include "absl/status/status.h"

namespace ddp::storage {

// Copies `db_path` into `to_path`, which must not exist.
// Possible errors: ALREADY_EXISTS (to_path exists), FAILED_PRECONDITION
// (db_path cannot be opened, to_path's folder not writable), UNAVAILABLE (I/O
// error, disk full: to_path is removed), DATA_LOSS (db_path is corrupt).
absl::Status CopySqliteDatabase(const std::string& db_path, const std::string& to_path);

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_SQLITE_SNAPSHOT_H_
