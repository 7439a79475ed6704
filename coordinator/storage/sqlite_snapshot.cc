#include "coordinator/storage/sqlite_snapshot.h"

#include <unistd.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/storage/sqlite_database.h"

namespace ddp::storage {

absl::Status CopySqliteDatabase(const std::string& db_path, const std::string& to_path) {
  if (access(to_path.c_str(), F_OK) == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat(to_path, " exists: the snapshot goes to a new file"));
  }
  SqliteDatabaseOptions options;
  options.create_if_missing = false;
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> db, SqliteDatabase::Open(db_path, options));
  // Blobs are how this layer binds text; VACUUM INTO wants a text file name.
  DDP_ASSIGN_OR_RETURN(SqliteStatement copy, db->Prepare("VACUUM INTO CAST(?1 AS TEXT)"));
  DDP_RETURN_IF_ERROR(copy.BindBlob(1, to_path));
  if (absl::Status copied = copy.Run(); !copied.ok()) {
    unlink(to_path.c_str());
    return copied;
  }
  return absl::OkStatus();
}

}  // namespace ddp::storage
