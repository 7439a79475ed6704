#include "coordinator/storage/data_dir_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/storage/sqlite_database.h"

namespace ddp::storage {
namespace {

constexpr char kStampTable[] = "ddp_identity";

struct DatabaseFile {
  std::string name;
  std::string path;
  bool exists = false;
  int64_t size = 0;
};

std::string IdentityPath(const std::string& dir) {
  return absl::StrCat(dir, "/", kIdentityFileName);
}

absl::Status IoError(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(errno)));
}

absl::StatusOr<std::string> NewIdentity() {
  unsigned char bytes[16];
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("open", "/dev/urandom");
  const ssize_t n = read(fd, bytes, sizeof(bytes));
  close(fd);
  if (n != static_cast<ssize_t>(sizeof(bytes))) return IoError("read", "/dev/urandom");
  bytes[6] = (bytes[6] & 0x0f) | 0x40;  // UUID version 4
  bytes[8] = (bytes[8] & 0x3f) | 0x80;  // RFC 4122 variant
  std::string id;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) id += '-';
    absl::StrAppendFormat(&id, "%02x", bytes[i]);
  }
  return id;
}

bool LooksLikeIdentity(absl::string_view id) {
  if (id.size() != 36) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? id[i] != '-' : !absl::ascii_isxdigit(id[i])) return false;
  }
  return true;
}

// Reads DATA_DIR/IDENTITY; nullopt when there is none.
absl::StatusOr<std::optional<std::string>> ReadIdentityFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<std::string>();
    return IoError("read", path);
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string id(absl::StripAsciiWhitespace(text.str()));
  if (!LooksLikeIdentity(id)) {
    return absl::DataLossError(
        absl::StrCat(path, " does not hold a data dir identity (expected a UUID, found ",
                     text.str().size(), " bytes); restore it from a backup of this data dir"));
  }
  return std::optional<std::string>(id);
}

absl::Status FsyncPath(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return IoError("open", path);
  const int rc = fsync(fd);
  close(fd);
  if (rc != 0) return IoError("fsync", path);
  return absl::OkStatus();
}

// Written before a new identity touches any database, removed once IDENTITY
// is written: a start that died in between (and left, say, a 0-byte
// database) is finished by the next one, while a 0-byte database with neither
// file was damaged.
std::string PendingIdentityPath(const std::string& dir) {
  return absl::StrCat(IdentityPath(dir), ".initialising");
}

absl::Status WriteIdFile(const std::string& dir, const std::string& path, const std::string& id) {
  const std::string temp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(temp, std::ios::trunc);
    out << id << "\n";
    out.close();
    if (!out) return IoError("write", temp);
  }
  DDP_RETURN_IF_ERROR(FsyncPath(temp, O_RDONLY));
  if (std::rename(temp.c_str(), path.c_str()) != 0) return IoError("rename to", path);
  return FsyncPath(dir, O_RDONLY | O_DIRECTORY);
}

absl::Status WriteIdentityFile(const std::string& dir, const std::string& id) {
  DDP_RETURN_IF_ERROR(WriteIdFile(dir, IdentityPath(dir), id));
  const std::string pending = PendingIdentityPath(dir);
  if (unlink(pending.c_str()) != 0 && errno != ENOENT) return IoError("unlink", pending);
  return absl::OkStatus();
}

// The id stamped into the database, or "" when it carries none.
absl::StatusOr<std::string> ReadStamp(SqliteDatabase& db) {
  DDP_ASSIGN_OR_RETURN(
      int64_t tables,
      db.QueryInt64(absl::StrCat("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                 "AND name = '",
                                 kStampTable, "'")));
  if (tables == 0) return std::string();
  DDP_ASSIGN_OR_RETURN(SqliteStatement select,
                       db.Prepare(absl::StrCat("SELECT id FROM ", kStampTable)));
  DDP_ASSIGN_OR_RETURN(bool row, select.Step());
  return row ? select.ColumnBlob(0) : std::string();
}

absl::Status WriteStamp(SqliteDatabase& db, const std::string& id) {
  DDP_ASSIGN_OR_RETURN(SqliteTransaction transaction, SqliteTransaction::Begin(db));
  DDP_RETURN_IF_ERROR(db.Execute(absl::StrCat("CREATE TABLE IF NOT EXISTS ", kStampTable,
                                              " (id BLOB NOT NULL); DELETE FROM ", kStampTable)));
  DDP_ASSIGN_OR_RETURN(SqliteStatement insert,
                       db.Prepare(absl::StrCat("INSERT INTO ", kStampTable, " (id) VALUES (?)")));
  DDP_RETURN_IF_ERROR(insert.BindBlob(1, id));
  DDP_RETURN_IF_ERROR(insert.Run());
  return transaction.Commit();
}

absl::StatusOr<std::unique_ptr<SqliteDatabase>> OpenExisting(const DatabaseFile& file) {
  SqliteDatabaseOptions options;
  options.create_if_missing = false;
  return SqliteDatabase::Open(file.path, options);
}

std::string StartOver(const std::string& dir) {
  return absl::StrCat(
      "restore it from a backup of this data dir; to start over with an empty store on "
      "purpose, move the whole data dir ",
      dir, " away (every key and job in it is then gone)");
}

// Every database of an initialised dir must be there and non-empty.
absl::Status CheckPresent(const std::string& dir, const DatabaseFile& file,
                          absl::string_view initialised_as) {
  if (!file.exists) {
    return absl::DataLossError(
        absl::StrCat(file.path, " is missing, but ", dir, " was initialised ", initialised_as,
                     ": the coordinator's state would start empty. ", StartOver(dir)));
  }
  if (file.size == 0) {
    return absl::DataLossError(absl::StrCat(
        file.path, " is empty (0 bytes), but ", dir, " was initialised ", initialised_as,
        ": the coordinator's state would start empty. ", StartOver(dir)));
  }
  return absl::OkStatus();
}

absl::Status CheckStamp(const DatabaseFile& file, const std::string& stamp, const std::string& id,
                        const std::string& dir) {
  if (stamp == id) return absl::OkStatus();
  if (stamp.empty()) {
    return absl::DataLossError(
        absl::StrCat(file.path, " carries no data dir identity, but ", dir, " is data dir ", id,
                     ": the file does not belong to this data dir (copied in from elsewhere?). Put "
                     "this dir's own ",
                     file.name, " back; ", StartOver(dir)));
  }
  return absl::DataLossError(
      absl::StrCat(file.path, " belongs to data dir ", stamp, ", but ", dir, " is data dir ", id,
                   ": it was copied in from another data dir. Put this dir's own ", file.name,
                   " back; ", StartOver(dir)));
}

}  // namespace

absl::StatusOr<std::string> EnsureDataDirIdentity(const std::string& data_dir,
                                                  const std::vector<std::string>& database_names) {
  std::vector<DatabaseFile> files;
  for (const std::string& name : database_names) {
    DatabaseFile file{name, absl::StrCat(data_dir, "/", name)};
    struct stat st;
    if (stat(file.path.c_str(), &st) == 0) {
      file.exists = true;
      file.size = st.st_size;
    } else if (errno != ENOENT) {
      return IoError("stat", file.path);
    }
    files.push_back(file);
  }
  const std::string identity_path = IdentityPath(data_dir);
  DDP_ASSIGN_OR_RETURN(std::optional<std::string> recorded, ReadIdentityFile(identity_path));

  if (recorded.has_value()) {
    const std::string as = absl::StrCat("as data dir ", *recorded, " (", identity_path, ")");
    for (const DatabaseFile& file : files) {
      DDP_RETURN_IF_ERROR(CheckPresent(data_dir, file, as));
      DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> db, OpenExisting(file));
      DDP_ASSIGN_OR_RETURN(std::string stamp, ReadStamp(*db));
      DDP_RETURN_IF_ERROR(CheckStamp(file, stamp, *recorded, data_dir));
    }
    return *recorded;
  }

  // No IDENTITY: a new dir, an interrupted initialisation, or a dir written
  // before identities existed.
  bool any_data = false;
  for (const DatabaseFile& file : files) any_data |= file.exists && file.size > 0;
  DDP_ASSIGN_OR_RETURN(std::optional<std::string> pending,
                       ReadIdentityFile(PendingIdentityPath(data_dir)));
  if (!any_data && !pending.has_value()) {
    // A new dir has no database at all; a 0-byte one without IDENTITY (and
    // without an initialisation under way) lost what it held.
    for (const DatabaseFile& file : files) {
      if (!file.exists) continue;
      return absl::DataLossError(absl::StrCat(
          file.path, " is empty (0 bytes), but ", data_dir,
          " has no IDENTITY: a new data dir has no database at all, so this one was used "
          "before and its state is gone (truncated, or the identity removed). ",
          StartOver(data_dir)));
    }
  }
  std::string id;
  if (any_data) {
    std::string stamped;
    for (const DatabaseFile& file : files) {
      if (!file.exists || file.size == 0) continue;
      DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> db, OpenExisting(file));
      DDP_ASSIGN_OR_RETURN(std::string stamp, ReadStamp(*db));
      if (stamp.empty()) continue;
      if (!stamped.empty() && stamp != stamped) {
        return CheckStamp(file, stamp, stamped, data_dir);
      }
      stamped = stamp;
    }
    if (stamped.empty()) {
      // Written by a release without identities: it always created every
      // database at its first start, so each must be there.
      for (const DatabaseFile& file : files) {
        DDP_RETURN_IF_ERROR(
            CheckPresent(data_dir, file, "by an earlier release (its databases hold data)"));
      }
      DDP_LOG(INFO) << "data dir " << data_dir
                    << " has no identity yet (written by an earlier release); adopting one";
    }
    id = stamped;
  }
  if (id.empty() && pending.has_value()) id = *pending;  // an interrupted first start
  if (id.empty()) {
    DDP_ASSIGN_OR_RETURN(id, NewIdentity());
    DDP_RETURN_IF_ERROR(WriteIdFile(data_dir, PendingIdentityPath(data_dir), id));
  }
  for (const DatabaseFile& file : files) {
    DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> db, SqliteDatabase::Open(file.path));
    DDP_ASSIGN_OR_RETURN(std::string stamp, ReadStamp(*db));
    if (stamp != id) DDP_RETURN_IF_ERROR(WriteStamp(*db, id));
  }
  DDP_RETURN_IF_ERROR(WriteIdentityFile(data_dir, id));
  DDP_LOG(INFO) << "data dir " << data_dir << " initialised as data dir " << id;
  return id;
}

}  // namespace ddp::storage
