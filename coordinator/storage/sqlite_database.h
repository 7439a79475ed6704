#ifndef DDP_COORDINATOR_STORAGE_SQLITE_DATABASE_H_
#define DDP_COORDINATOR_STORAGE_SQLITE_DATABASE_H_

// A small RAII layer over the SQLite C API, shared by every durable part of the
// coordinator (the KV backend now; the job/rendezvous state later, in other
// tables of the same file):
//   - SqliteDatabase: one connection, opened with WAL, synchronous=FULL, a busy
//     timeout and foreign keys; runs SQL, prepares (and caches) statements, and
//     migrates the schema by `PRAGMA user_version`.
//   - SqliteStatement: a prepared statement with bind/step/column helpers. Text
//   and
//     bytes are always bound as BLOBs, so arbitrary bytes (embedded NULs, 0xFF)
//     round-trip exactly and compare bytewise (memcmp order).
//   - SqliteTransaction: BEGIN IMMEDIATE ... COMMIT; rolls back on destruction
//   unless
//     committed.
//
// Every SQLite failure becomes an absl::Status that names the SQL
// (size-capped), the SQLite result code and sqlite3_errmsg():
//   UNAVAILABLE          I/O errors, busy/locked (timeout passed), disk full,
//                        no memory, in a statement before COMMIT (the
//                        transaction was rolled back: the operation had no
//                        effect; retry later);
//   UNKNOWN              COMMIT itself failed (I/O error, disk full, fsync
//                        error): the transaction may or may not be durable;
//                        the connection is failed (below);
//   DATA_LOSS            SQLITE_CORRUPT, SQLITE_NOTADB; the message carries
//                        the result of PRAGMA quick_check on the file, and
//                        advises a restore from a backup only when it found
//                        damage;
//   FAILED_PRECONDITION  the file cannot be opened or written (SQLITE_CANTOPEN,
//                        SQLITE_READONLY, SQLITE_PERM): fix the path or
//                        permissions;
//   RESOURCE_EXHAUSTED   SQLITE_TOOBIG (a row over SQLite's size limit);
//   INTERNAL             everything else (misuse, SQL errors, constraint
//   violations:
//                        bugs in the caller).
//
// Fail-stop: after an I/O error (SQLITE_IOERR, in any statement) or a failed
// COMMIT, the connection refuses every later transaction (Begin returns
// FAILED_PRECONDITION naming the first error) until the process restarts and
// SQLite recovers the file from its write-ahead log. Retrying after an fsync
// error is unsafe (the kernel may have dropped the dirty pages it failed to
// write), and the caller's in-memory state may no longer match the file.
//
// Thread-safety: a SqliteDatabase (and the statements and transactions made
// from it) is NOT thread-safe: use one connection per thread, or guard a
// connection and all of its statements with one mutex. Several connections
// (threads or processes) may share one file: WAL lets readers run concurrently
// with one writer.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "coordinator/storage/sqlite_sync_timer.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ddp::storage {

struct SqliteDatabaseOptions {
  // How long a statement waits for another connection's lock before failing
  // with UNAVAILABLE.
  absl::Duration busy_timeout = absl::Seconds(5);
  // Create the file when it does not exist.
  bool create_if_missing = true;
  // With on_sync: every fsync of this connection's files timed and reported
  // (through a SqliteSyncTimer the database owns; sqlite_sync_timer.h).
  SqliteSyncTiming sync_timing;
};

// One schema step: `sql` (one or more statements) brings the schema from
// version - 1 to `version`.
struct SqliteMigration {
  int version = 0;
  std::string sql;
};

class SqliteDatabase;

class SqliteStatement {
 public:
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement();  // Finalizes.

  // Parameters are numbered from 1. Bytes are copied (SQLITE_TRANSIENT).
  absl::Status BindInt64(int index, int64_t value);
  absl::Status BindBlob(int index, absl::string_view bytes);  // "" binds x''
  absl::Status BindNull(int index);

  // Runs one step. Returns true when a row is available, false when done.
  // Possible errors: see the file comment.
  absl::StatusOr<bool> Step();
  // Steps until done (for statements that return no rows, or whose rows are not
  // needed), then resets and clears the bindings.
  absl::Status Run();
  // Makes the statement ready to run again and clears its bindings.
  void Reset();

  // Columns are numbered from 0; valid after Step() returned true.
  int64_t ColumnInt64(int column) const;
  // The column's bytes (a NULL column reads as "").
  std::string ColumnBlob(int column) const;
  bool ColumnIsNull(int column) const;
  int ColumnCount() const;

  const std::string& sql() const { return sql_; }

 private:
  friend class SqliteDatabase;
  SqliteStatement(SqliteDatabase* db, sqlite3_stmt* stmt, std::string sql);
  absl::Status CheckBind(int rc, int index);

  SqliteDatabase* db_;
  sqlite3_stmt* stmt_;
  std::string sql_;
};

class SqliteDatabase {
 public:
  // Opens (and by default creates) the database at `path` and applies
  // journal_mode=WAL, synchronous=FULL, busy_timeout and foreign_keys=ON.
  // Possible errors: FAILED_PRECONDITION (cannot open/create the file: missing
  // directory, no permission), DATA_LOSS (not a SQLite database or corrupt),
  // UNAVAILABLE (I/O error, locked by another process past the busy timeout).
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> Open(const std::string& path,
                                                              SqliteDatabaseOptions options = {});

  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;
  ~SqliteDatabase();  // Finalizes cached statements and closes the connection.

  // Runs one or more SQL statements that take no parameters.
  absl::Status Execute(absl::string_view sql);

  // Compiles `sql` (exactly one statement).
  absl::StatusOr<SqliteStatement> Prepare(absl::string_view sql);

  // Like Prepare, but the statement is compiled once and kept by this database;
  // it is returned reset. The pointer stays valid for the database's lifetime.
  // Use it for statements that run often.
  absl::StatusOr<SqliteStatement*> PrepareCached(absl::string_view sql);

  // Runs a query that returns one integer (e.g. a pragma).
  absl::StatusOr<int64_t> QueryInt64(absl::string_view sql);

  // Brings the schema to the last version in `migrations`. Each pending step
  // runs in its own IMMEDIATE transaction together with `PRAGMA user_version =
  // version`, so a step runs exactly once even if several processes migrate at
  // the same time. `migrations` must be numbered 1, 2, 3, ... in order. Note:
  // user_version is one number per file: all components that share a file must
  // share one ordered list of migrations.
  // Possible errors: INVALID_ARGUMENT (badly numbered list),
  // FAILED_PRECONDITION (the file's schema is newer than the list: a newer
  // binary wrote it), and SQL errors.
  absl::Status Migrate(const std::vector<SqliteMigration>& migrations);

  // PRAGMA user_version.
  absl::StatusOr<int64_t> UserVersion();

  // True when no transaction is open (SQLite's autocommit mode).
  bool InAutocommit() const;

  // Rows changed by the last INSERT/UPDATE/DELETE on this connection.
  int64_t ChangedRows() const;

  // Converts a SQLite result code into a Status naming `sql` and this
  // connection's last error message. `rc` must not be SQLITE_OK/ROW/DONE.
  absl::Status ErrorStatus(int rc, absl::string_view sql) const;

  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }

  // The first error that failed this connection (see "Fail-stop"), or OK.
  const absl::Status& failure() const { return failure_; }

 private:
  friend class SqliteTransaction;
  SqliteDatabase(sqlite3* db, std::string path, std::unique_ptr<SqliteSyncTimer> sync_timer);
  // Records the first failure; later transactions are refused.
  void Fail(const absl::Status& cause) const;

  // Outlives db_: the destructor closes the connection first.
  std::unique_ptr<SqliteSyncTimer> sync_timer_;
  sqlite3* db_;
  std::string path_;
  absl::flat_hash_map<std::string, std::unique_ptr<SqliteStatement>> cache_;
  // Set from ErrorStatus, which const readers call too.
  mutable absl::Status failure_;
};

// BEGIN IMMEDIATE (takes the write lock now, so a busy file fails here, not at
// COMMIT) ... Commit(). Destroying an uncommitted transaction rolls it back.
class SqliteTransaction {
 public:
  // Possible errors: UNAVAILABLE (another writer holds the lock past the busy
  // timeout), INTERNAL (a transaction is already open on this connection),
  // FAILED_PRECONDITION (the connection failed earlier: restart).
  static absl::StatusOr<SqliteTransaction> Begin(SqliteDatabase& db);

  SqliteTransaction(SqliteTransaction&& other) noexcept;
  SqliteTransaction& operator=(SqliteTransaction&&) = delete;
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;
  ~SqliteTransaction();

  // Makes the transaction durable. Errors: UNKNOWN when COMMIT failed (the
  // outcome is unknown and the connection is failed); UNAVAILABLE when the
  // file was busy (nothing written).
  absl::Status Commit();
  // Undoes the transaction now. Idempotent.
  absl::Status Rollback();

 private:
  explicit SqliteTransaction(SqliteDatabase* db) : db_(db) {}
  SqliteDatabase* db_;  // null once committed or rolled back
};

// The code SQLite result `rc` maps to (see the file comment).
absl::StatusCode SqliteResultToStatusCode(int rc);

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_SQLITE_DATABASE_H_
