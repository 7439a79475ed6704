#ifndef DDP_COORDINATOR_STORAGE_DATA_DIR_IDENTITY_H_
#define DDP_COORDINATOR_STORAGE_DATA_DIR_IDENTITY_H_

// The identity of a coordinator data directory: a random id written once, when
// the directory is initialised, to DATA_DIR/IDENTITY and into every database of
// the directory (table `ddp_identity`). At every start it tells an initialised
// directory apart from an empty one, so that a database that went missing, was
// truncated to zero bytes, or was copied in from another directory is refused
// instead of being served as an empty store.
//
//   IDENTITY absent, no database -> initialise: new id, written to
//       IDENTITY.initialising first, then stamped into every database, IDENTITY
//       written last (temp file, fsync, rename, fsync of the directory), so an
//       interrupted start is finished by the next one.
//   IDENTITY absent, 0-byte databases and no IDENTITY.initialising -> DATA_LOSS
//       (the dir was used before; a new one has no database file at all).
//   IDENTITY absent, databases present -> a directory written before identities
//       existed (or an interrupted initialisation): every database must be
//       there and non-empty; the id they carry (all the same) or a new one is
//       stamped into each, then IDENTITY is written.
//   IDENTITY present -> every database must exist, be non-empty and carry that
//       id.
//
// Errors: DATA_LOSS a database is missing, empty, foreign or carries another id
// (the message names the file and what to do); FAILED_PRECONDITION the
// directory or a file cannot be read or written; UNAVAILABLE I/O errors.
// Call it while holding the data dir's lock, before the stores open the files.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddp::storage {

// `database_names` are file names inside `data_dir` (e.g. "coordinator.db").
// Returns the directory's identity.
absl::StatusOr<std::string> EnsureDataDirIdentity(const std::string& data_dir,
                                                  const std::vector<std::string>& database_names);

// The file inside the data dir that holds the identity.
inline constexpr char kIdentityFileName[] = "IDENTITY";

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_DATA_DIR_IDENTITY_H_
