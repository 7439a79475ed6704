#include "coordinator/storage/sqlite_database.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ddp::storage {
namespace {

constexpr size_t kMaxSqlInMessage = 200;

std::string CapSql(absl::string_view sql) {
  if (sql.size() <= kMaxSqlInMessage) return std::string(sql);
  return absl::StrCat(sql.substr(0, kMaxSqlInMessage), "...");
}

// What the operator should do, per status code.
absl::string_view Advice(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
      return "the operation had no effect; retry later";
    case absl::StatusCode::kFailedPrecondition:
      return "check that the directory exists and the file is writable by this "
             "process";
    case absl::StatusCode::kResourceExhausted:
      return "a row is over SQLite's size limit";
    default:
      return "this is a bug in the caller";
  }
}

// Runs PRAGMA quick_check on `path` through a connection of its own and says
// what it found, so that a restore from a backup is advised only for a file
// that is really damaged (a failing disk or file system can make SQLite report
// corruption of an intact file).
std::string IntegrityAdvice(const std::string& path) {
  sqlite3* raw = nullptr;
  std::string verdict;
  if (sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(raw, "PRAGMA quick_check(5)", -1, &stmt, nullptr) == SQLITE_OK) {
      while (sqlite3_step(stmt) == SQLITE_ROW) {
        const unsigned char* text = sqlite3_column_text(stmt, 0);
        absl::StrAppend(&verdict, verdict.empty() ? "" : "; ",
                        text != nullptr ? reinterpret_cast<const char*>(text) : "");
      }
      sqlite3_finalize(stmt);
    }
    if (verdict.empty()) verdict = sqlite3_errmsg(raw);
  }
  sqlite3_close(raw);
  if (verdict == "ok") {
    return "PRAGMA quick_check found no damage in the file, so the disk or file system "
           "is the likely cause: check the kernel log (dmesg) and restart the "
           "coordinator; do not restore from a backup";
  }
  return absl::StrCat("PRAGMA quick_check reports: ", verdict.substr(0, 300),
                      "; if the file is damaged, restore it from a backup or move it away");
}

}  // namespace

absl::StatusCode SqliteResultToStatusCode(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_NOMEM:
    case SQLITE_PROTOCOL:
    case SQLITE_INTERRUPT:
    case SQLITE_ABORT:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_TOOBIG:
      return absl::StatusCode::kResourceExhausted;
    default:
      return absl::StatusCode::kInternal;
  }
}

// ---------------------------------------------------------------------------
// SqliteStatement

SqliteStatement::SqliteStatement(SqliteDatabase* db, sqlite3_stmt* stmt, std::string sql)
    : db_(db), stmt_(stmt), sql_(std::move(sql)) {}

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_), sql_(std::move(other.sql_)) {
  other.stmt_ = nullptr;
}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = other.stmt_;
    sql_ = std::move(other.sql_);
    other.stmt_ = nullptr;
  }
  return *this;
}

SqliteStatement::~SqliteStatement() { sqlite3_finalize(stmt_); }

absl::Status SqliteStatement::CheckBind(int rc, int index) {
  if (rc == SQLITE_OK) return absl::OkStatus();
  return db_->ErrorStatus(rc, absl::StrCat(sql_, " [binding parameter ", index, "]"));
}

absl::Status SqliteStatement::BindInt64(int index, int64_t value) {
  return CheckBind(sqlite3_bind_int64(stmt_, index, value), index);
}

absl::Status SqliteStatement::BindBlob(int index, absl::string_view bytes) {
  // A null pointer would bind NULL, not an empty blob.
  if (bytes.empty()) return CheckBind(sqlite3_bind_zeroblob(stmt_, index, 0), index);
  return CheckBind(sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT),
                   index);
}

absl::Status SqliteStatement::BindNull(int index) {
  return CheckBind(sqlite3_bind_null(stmt_, index), index);
}

absl::StatusOr<bool> SqliteStatement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->ErrorStatus(rc, sql_);
}

absl::Status SqliteStatement::Run() {
  absl::Status status;
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) {
      status = row.status();
      break;
    }
    if (!*row) break;
  }
  Reset();
  return status;
}

void SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t SqliteStatement::ColumnInt64(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

std::string SqliteStatement::ColumnBlob(int column) const {
  // Order matters: column_blob first, then column_bytes (SQLite's documented
  // rule).
  const void* data = sqlite3_column_blob(stmt_, column);
  const int size = sqlite3_column_bytes(stmt_, column);
  if (data == nullptr || size <= 0) return std::string();
  return std::string(static_cast<const char*>(data), static_cast<size_t>(size));
}

bool SqliteStatement::ColumnIsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int SqliteStatement::ColumnCount() const { return sqlite3_column_count(stmt_); }

// ---------------------------------------------------------------------------
// SqliteDatabase

SqliteDatabase::SqliteDatabase(sqlite3* db, std::string path,
                               std::unique_ptr<SqliteSyncTimer> sync_timer)
    : sync_timer_(std::move(sync_timer)), db_(db), path_(std::move(path)) {}

SqliteDatabase::~SqliteDatabase() {
  cache_.clear();  // statements must be finalized before the connection closes
  sqlite3_close_v2(db_);
}

absl::StatusOr<std::unique_ptr<SqliteDatabase>> SqliteDatabase::Open(
    const std::string& path, SqliteDatabaseOptions options) {
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (options.create_if_missing) flags |= SQLITE_OPEN_CREATE;
  std::unique_ptr<SqliteSyncTimer> sync_timer;
  if (options.sync_timing.on_sync) {
    DDP_ASSIGN_OR_RETURN(sync_timer, SqliteSyncTimer::Register(options.sync_timing));
  }
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags,
                                 sync_timer != nullptr ? sync_timer->vfs_name().c_str() : nullptr);
  // Even on failure SQLite usually allocates a handle; own it so it gets
  // closed.
  std::unique_ptr<SqliteDatabase> db(new SqliteDatabase(raw, path, std::move(sync_timer)));
  if (rc != SQLITE_OK) {
    if (raw == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("SQLite could not allocate a connection for ", path));
    }
    return db->ErrorStatus(rc, "open");
  }
  // SQLite silently falls back to read-only when the file is not writable; the
  // coordinator always writes, so say so now rather than at the first commit.
  if (sqlite3_db_readonly(raw, "main") == 1) {
    return absl::FailedPreconditionError(
        absl::StrFormat("SQLite database %s could only be opened read-only; "
                        "make the file and its "
                        "directory writable by this process",
                        path));
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, static_cast<int>(absl::ToInt64Milliseconds(options.busy_timeout)));

  // journal_mode returns the mode actually in effect; an in-memory database
  // stays "memory", anything else must become WAL.
  DDP_ASSIGN_OR_RETURN(SqliteStatement journal, db->Prepare("PRAGMA journal_mode=WAL"));
  DDP_ASSIGN_OR_RETURN(bool row, journal.Step());
  const std::string mode = row ? journal.ColumnBlob(0) : std::string();
  journal.Reset();
  if (mode != "wal" && mode != "memory") {
    return absl::FailedPreconditionError(
        absl::StrFormat("SQLite database %s: could not switch to WAL journal mode (got '%s'); "
                        "the file "
                        "system may not support shared memory (use a local disk)",
                        path, mode));
  }
  DDP_RETURN_IF_ERROR(db->Execute("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"));
  return db;
}

absl::Status SqliteDatabase::ErrorStatus(int rc, absl::string_view sql) const {
  const absl::StatusCode code = SqliteResultToStatusCode(rc);
  const char* detail = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  const bool io_error = (rc & 0xff) == SQLITE_IOERR;
  const std::string advice = code == absl::StatusCode::kDataLoss ? IntegrityAdvice(path_)
                             : io_error
                                 ? "the database refuses writes until the coordinator is restarted"
                                 : std::string(Advice(code));
  absl::Status status(code,
                      absl::StrFormat("SQLite error %d (%s) on `%s` in database %s: %s; %s", rc,
                                      sqlite3_errstr(rc), CapSql(sql), path_, detail, advice));
  if (io_error) Fail(status);
  return status;
}

void SqliteDatabase::Fail(const absl::Status& cause) const {
  if (failure_.ok()) failure_ = cause;
}

absl::Status SqliteDatabase::Execute(absl::string_view sql) {
  const std::string owned(sql);
  const int rc = sqlite3_exec(db_, owned.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return ErrorStatus(rc, sql);
  return absl::OkStatus();
}

absl::StatusOr<SqliteStatement> SqliteDatabase::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, &tail);
  if (rc != SQLITE_OK) return ErrorStatus(rc, sql);
  SqliteStatement statement(this, stmt, std::string(sql));
  if (stmt == nullptr) {
    return absl::InternalError(
        absl::StrFormat("SQL `%s` holds no statement (database %s)", CapSql(sql), path_));
  }
  const absl::string_view rest(tail, sql.data() + sql.size() - tail);
  if (rest.find_first_not_of(" \t\r\n;") != absl::string_view::npos) {
    return absl::InternalError(
        absl::StrFormat("SQL `%s` holds more than one statement; Prepare takes "
                        "exactly one (database %s)",
                        CapSql(sql), path_));
  }
  return statement;
}

absl::StatusOr<SqliteStatement*> SqliteDatabase::PrepareCached(absl::string_view sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) {
    it->second->Reset();
    return it->second.get();
  }
  DDP_ASSIGN_OR_RETURN(SqliteStatement statement, Prepare(sql));
  auto owned = std::make_unique<SqliteStatement>(std::move(statement));
  SqliteStatement* result = owned.get();
  cache_.emplace(std::string(sql), std::move(owned));
  return result;
}

absl::StatusOr<int64_t> SqliteDatabase::QueryInt64(absl::string_view sql) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement * statement, PrepareCached(sql));
  absl::StatusOr<bool> row = statement->Step();
  if (!row.ok()) {
    statement->Reset();
    return row.status();
  }
  if (!*row) {
    return absl::InternalError(
        absl::StrFormat("SQL `%s` returned no row (database %s)", CapSql(sql), path_));
  }
  const int64_t value = statement->ColumnInt64(0);
  statement->Reset();
  return value;
}

absl::StatusOr<int64_t> SqliteDatabase::UserVersion() { return QueryInt64("PRAGMA user_version"); }

bool SqliteDatabase::InAutocommit() const { return sqlite3_get_autocommit(db_) != 0; }

int64_t SqliteDatabase::ChangedRows() const { return sqlite3_changes64(db_); }

absl::Status SqliteDatabase::Migrate(const std::vector<SqliteMigration>& migrations) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i + 1)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("schema migration #%d has version %d; versions must "
                          "be 1, 2, 3, ... in order",
                          i + 1, migrations[i].version));
    }
  }
  const int64_t latest = static_cast<int64_t>(migrations.size());
  for (const SqliteMigration& migration : migrations) {
    // Read the version inside the write transaction: a concurrent migrator
    // either finished before us (we skip) or waits for us.
    DDP_ASSIGN_OR_RETURN(SqliteTransaction transaction, SqliteTransaction::Begin(*this));
    DDP_ASSIGN_OR_RETURN(int64_t current, UserVersion());
    if (current > latest) break;  // reported below
    if (current >= migration.version) continue;
    absl::Status status = Execute(migration.sql);
    if (!status.ok()) return status;
    status = Execute(absl::StrCat("PRAGMA user_version = ", migration.version));
    if (!status.ok()) return status;
    status = transaction.Commit();
    if (!status.ok()) return status;
  }
  DDP_ASSIGN_OR_RETURN(int64_t current, UserVersion());
  if (current > latest) {
    return absl::FailedPreconditionError(
        absl::StrFormat("database %s has schema version %d but this binary "
                        "knows versions up to %d; it "
                        "was written by a newer coordinator: run that version "
                        "or use another file",
                        path_, current, latest));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// SqliteTransaction

absl::StatusOr<SqliteTransaction> SqliteTransaction::Begin(SqliteDatabase& db) {
  if (!db.InAutocommit()) {
    return absl::InternalError(
        absl::StrFormat("a transaction is already open on database %s; nested "
                        "transactions are not "
                        "supported",
                        db.path()));
  }
  if (!db.failure().ok()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("database %s refuses writes after a storage failure (%s); restart the "
                        "coordinator: SQLite recovers the file from its write-ahead log at start",
                        db.path(), db.failure().message()));
  }
  DDP_ASSIGN_OR_RETURN(SqliteStatement * begin, db.PrepareCached("BEGIN IMMEDIATE"));
  DDP_RETURN_IF_ERROR(begin->Run());
  return SqliteTransaction(&db);
}

SqliteTransaction::SqliteTransaction(SqliteTransaction&& other) noexcept : db_(other.db_) {
  other.db_ = nullptr;
}

SqliteTransaction::~SqliteTransaction() { Rollback().IgnoreError(); }

absl::Status SqliteTransaction::Commit() {
  if (db_ == nullptr) {
    return absl::InternalError("Commit on a transaction that already ended");
  }
  absl::StatusOr<SqliteStatement*> commit = db_->PrepareCached("COMMIT");
  absl::Status status = commit.ok() ? (*commit)->Run() : commit.status();
  if (!status.ok()) {
    SqliteDatabase* db = db_;
    const int extended = sqlite3_extended_errcode(db->handle());
    const int rc = extended & 0xff;
    const std::string detail = sqlite3_errmsg(db->handle());
    Rollback().IgnoreError();
    // A busy file refuses COMMIT before writing anything; any other failure
    // may come after some or all of the transaction reached the disk.
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return status;
    // Not the message of `status`: its advice ("had no effect; retry") is
    // what an unknown outcome must never say.
    absl::Status unknown = absl::UnknownError(absl::StrFormat(
        "the outcome of a commit is unknown: it may or may not be durable (SQLite error %d "
        "(%s) on COMMIT in database %s: %s); the database refuses writes until the "
        "coordinator is restarted; read the state before retrying a write that is not "
        "idempotent",
        extended, sqlite3_errstr(extended), db->path(), detail));
    db->Fail(unknown);
    return unknown;
  }
  db_ = nullptr;
  return absl::OkStatus();
}

absl::Status SqliteTransaction::Rollback() {
  if (db_ == nullptr) return absl::OkStatus();
  SqliteDatabase* db = db_;
  db_ = nullptr;
  // Some errors (I/O, full disk) already rolled the transaction back.
  if (db->InAutocommit()) return absl::OkStatus();
  DDP_ASSIGN_OR_RETURN(SqliteStatement * rollback, db->PrepareCached("ROLLBACK"));
  return rollback->Run();
}

}  // namespace ddp::storage
