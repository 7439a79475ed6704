#include "coordinator/storage/sqlite_database.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <fstream>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::storage {
namespace {

using ::testing::HasSubstr;

// A fresh directory under TEST_TMPDIR for one test.
std::string MakeTempDir() {
  const char* root = getenv("TEST_TMPDIR");
  std::string pattern = std::string(root != nullptr ? root : "/tmp") + "/sqlitedbXXXXXX";
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

class SqliteDatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = MakeTempDir() + "/test.db";
    db_ = MustOpen();
  }

  std::unique_ptr<SqliteDatabase> MustOpen(SqliteDatabaseOptions options = {}) {
    absl::StatusOr<std::unique_ptr<SqliteDatabase>> db = SqliteDatabase::Open(path_, options);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(db).value() : nullptr;
  }

  std::string QueryText(SqliteDatabase& db, const std::string& sql) {
    absl::StatusOr<SqliteStatement> statement = db.Prepare(sql);
    EXPECT_TRUE(statement.ok()) << statement.status();
    if (!statement.ok()) return "";
    absl::StatusOr<bool> row = statement->Step();
    EXPECT_TRUE(row.ok() && *row);
    return row.ok() && *row ? statement->ColumnBlob(0) : "";
  }

  int64_t Count(SqliteDatabase& db, const std::string& table) {
    absl::StatusOr<int64_t> count = db.QueryInt64("SELECT COUNT(*) FROM " + table);
    EXPECT_TRUE(count.ok()) << count.status();
    return count.ok() ? *count : -1;
  }

  std::string path_;
  std::unique_ptr<SqliteDatabase> db_;
};

TEST_F(SqliteDatabaseTest, Open_NewFile_AppliesPragmas) {
  SqliteDatabaseOptions options;
  options.busy_timeout = absl::Milliseconds(1234);
  std::unique_ptr<SqliteDatabase> db = MustOpen(options);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(QueryText(*db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(*db->QueryInt64("PRAGMA synchronous"), 2);  // FULL
  EXPECT_EQ(*db->QueryInt64("PRAGMA foreign_keys"), 1);
  EXPECT_EQ(*db->QueryInt64("PRAGMA busy_timeout"), 1234);
}

TEST_F(SqliteDatabaseTest, Execute_ForeignKeyViolation_Internal) {
  ASSERT_TRUE(db_->Execute("CREATE TABLE parent (id INTEGER PRIMARY KEY);"
                           "CREATE TABLE child (parent_id INTEGER REFERENCES parent(id));")
                  .ok());
  absl::Status status = db_->Execute("INSERT INTO child VALUES (42)");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("FOREIGN KEY"));
}

TEST_F(SqliteDatabaseTest, Transaction_DestroyedWithoutCommit_RollsBack) {
  ASSERT_TRUE(db_->Execute("CREATE TABLE t (x INTEGER)").ok());
  {
    absl::StatusOr<SqliteTransaction> transaction = SqliteTransaction::Begin(*db_);
    ASSERT_TRUE(transaction.ok()) << transaction.status();
    ASSERT_TRUE(db_->Execute("INSERT INTO t VALUES (1)").ok());
    EXPECT_FALSE(db_->InAutocommit());
  }
  EXPECT_TRUE(db_->InAutocommit());
  EXPECT_EQ(Count(*db_, "t"), 0);
}

TEST_F(SqliteDatabaseTest, Transaction_Commit_VisibleToOtherConnection) {
  ASSERT_TRUE(db_->Execute("CREATE TABLE t (x INTEGER)").ok());
  absl::StatusOr<SqliteTransaction> transaction = SqliteTransaction::Begin(*db_);
  ASSERT_TRUE(transaction.ok());
  ASSERT_TRUE(db_->Execute("INSERT INTO t VALUES (1), (2)").ok());
  ASSERT_TRUE(transaction->Commit().ok());
  std::unique_ptr<SqliteDatabase> other = MustOpen();
  EXPECT_EQ(Count(*other, "t"), 2);
  EXPECT_EQ(transaction->Commit().code(),
            absl::StatusCode::kInternal);  // already ended
}

TEST_F(SqliteDatabaseTest, Transaction_BeginWhileOpen_Internal) {
  absl::StatusOr<SqliteTransaction> outer = SqliteTransaction::Begin(*db_);
  ASSERT_TRUE(outer.ok());
  EXPECT_EQ(SqliteTransaction::Begin(*db_).status().code(), absl::StatusCode::kInternal);
}

TEST_F(SqliteDatabaseTest, Transaction_OtherConnectionHoldsLock_UnavailableAfterTimeout) {
  SqliteDatabaseOptions options;
  options.busy_timeout = absl::Milliseconds(20);
  std::unique_ptr<SqliteDatabase> other = MustOpen(options);
  absl::StatusOr<SqliteTransaction> holder = SqliteTransaction::Begin(*db_);
  ASSERT_TRUE(holder.ok());
  absl::StatusOr<SqliteTransaction> blocked = SqliteTransaction::Begin(*other);
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(blocked.status().message(), HasSubstr("BEGIN IMMEDIATE"));
  EXPECT_THAT(blocked.status().message(), HasSubstr(path_));
}

TEST_F(SqliteDatabaseTest, Migrate_RunTwice_AppliesEachStepOnce) {
  std::vector<SqliteMigration> migrations = {
      {1, "CREATE TABLE log (step INTEGER); INSERT INTO log VALUES (1);"},
      {2, "INSERT INTO log VALUES (2);"}};
  ASSERT_TRUE(db_->Migrate(migrations).ok());
  ASSERT_TRUE(db_->Migrate(migrations).ok());
  EXPECT_EQ(Count(*db_, "log"), 2);
  EXPECT_EQ(*db_->UserVersion(), 2);

  migrations.push_back({3, "INSERT INTO log VALUES (3);"});
  std::unique_ptr<SqliteDatabase> reopened = MustOpen();
  ASSERT_TRUE(reopened->Migrate(migrations).ok());
  EXPECT_EQ(Count(*reopened, "log"), 3);
  EXPECT_EQ(*reopened->UserVersion(), 3);
}

TEST_F(SqliteDatabaseTest, Migrate_FailingStep_RollsBackThatStep) {
  std::vector<SqliteMigration> migrations = {{1, "CREATE TABLE a (x INTEGER);"},
                                             {2, "CREATE TABLE b (x INTEGER); THIS IS NOT SQL;"}};
  absl::Status status = db_->Migrate(migrations);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("THIS IS NOT SQL"));
  EXPECT_EQ(*db_->UserVersion(), 1);
  EXPECT_TRUE(db_->InAutocommit());
  EXPECT_FALSE(db_->Prepare("SELECT * FROM b").ok());  // step 2 left nothing behind
}

TEST_F(SqliteDatabaseTest, Migrate_BadNumbering_InvalidArgument) {
  EXPECT_EQ(db_->Migrate({{2, "SELECT 1"}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*db_->UserVersion(), 0);
}

TEST_F(SqliteDatabaseTest, Migrate_FileFromNewerBinary_FailedPrecondition) {
  ASSERT_TRUE(db_->Execute("PRAGMA user_version = 9").ok());
  absl::Status status = db_->Migrate({{1, "CREATE TABLE a (x INTEGER)"}});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("schema version 9"));
  EXPECT_FALSE(db_->Prepare("SELECT * FROM a").ok());
}

TEST_F(SqliteDatabaseTest, Statement_BytesWithNuls_RoundTripAsBlobs) {
  ASSERT_TRUE(db_->Execute("CREATE TABLE t (b BLOB NOT NULL, n INTEGER)").ok());
  const std::string bytes("\0a\xff\0", 4);
  absl::StatusOr<SqliteStatement> insert = db_->Prepare("INSERT INTO t VALUES (?1, ?2)");
  ASSERT_TRUE(insert.ok());
  ASSERT_TRUE(insert->BindBlob(1, bytes).ok());
  ASSERT_TRUE(insert->BindInt64(2, int64_t{1} << 40).ok());
  ASSERT_TRUE(insert->Run().ok());
  ASSERT_TRUE(insert->BindBlob(1, "").ok());  // empty, not NULL: NOT NULL holds
  ASSERT_TRUE(insert->BindInt64(2, 2).ok());
  ASSERT_TRUE(insert->Run().ok());

  absl::StatusOr<SqliteStatement> select = db_->Prepare("SELECT b, n, NULL FROM t ORDER BY n DESC");
  ASSERT_TRUE(select.ok());
  ASSERT_TRUE(*select->Step());
  EXPECT_EQ(select->ColumnBlob(0), bytes);
  EXPECT_EQ(select->ColumnInt64(1), int64_t{1} << 40);
  EXPECT_TRUE(select->ColumnIsNull(2));
  ASSERT_TRUE(*select->Step());
  EXPECT_EQ(select->ColumnBlob(0), "");
  EXPECT_FALSE(select->ColumnIsNull(0));
  EXPECT_FALSE(*select->Step());
}

TEST_F(SqliteDatabaseTest, Prepare_BadSql_InternalNamingTheSql) {
  absl::StatusOr<SqliteStatement> statement = db_->Prepare("SELEKT 1");
  EXPECT_EQ(statement.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(statement.status().message(), HasSubstr("SELEKT 1"));
  EXPECT_THAT(statement.status().message(), HasSubstr("syntax error"));
}

TEST_F(SqliteDatabaseTest, Prepare_TwoStatements_Internal) {
  EXPECT_EQ(db_->Prepare("SELECT 1; SELECT 2").status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(db_->Prepare("SELECT 1;  ").ok());
}

TEST_F(SqliteDatabaseTest, PrepareCached_SameSql_ReturnsSameResetStatement) {
  absl::StatusOr<SqliteStatement*> first = db_->PrepareCached("SELECT 7");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(*(*first)->Step());  // left mid-result on purpose
  absl::StatusOr<SqliteStatement*> second = db_->PrepareCached("SELECT 7");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  ASSERT_TRUE(*(*second)->Step());
  EXPECT_EQ((*second)->ColumnInt64(0), 7);
}

TEST(SqliteDatabaseOpenTest, Open_GarbageFile_DataLoss) {
  const std::string path = MakeTempDir() + "/garbage.db";
  std::ofstream(path) << std::string(8192, 'x');
  absl::StatusOr<std::unique_ptr<SqliteDatabase>> db = SqliteDatabase::Open(path);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(db.status().message(), HasSubstr("not a database"));
  EXPECT_THAT(db.status().message(), HasSubstr(path));
}

TEST(SqliteDatabaseOpenTest, Open_ParentIsAFile_FailedPrecondition) {
  const std::string file = MakeTempDir() + "/plain-file";
  std::ofstream(file) << "x";
  absl::StatusOr<std::unique_ptr<SqliteDatabase>> db = SqliteDatabase::Open(file + "/kv.db");
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(db.status().message(), HasSubstr(file + "/kv.db"));
}

TEST(SqliteDatabaseOpenTest, Open_MissingFileWithoutCreate_FailedPrecondition) {
  SqliteDatabaseOptions options;
  options.create_if_missing = false;
  EXPECT_EQ(SqliteDatabase::Open(MakeTempDir() + "/absent.db", options).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(SqliteResultToStatusCodeTest, ResultCodes_MapToRetryMeaning) {
  EXPECT_EQ(SqliteResultToStatusCode(SQLITE_BUSY), absl::StatusCode::kUnavailable);
  EXPECT_EQ(SqliteResultToStatusCode(SQLITE_IOERR_FSYNC), absl::StatusCode::kUnavailable);
  EXPECT_EQ(SqliteResultToStatusCode(SQLITE_FULL), absl::StatusCode::kUnavailable);
  EXPECT_EQ(SqliteResultToStatusCode(SQLITE_CORRUPT), absl::StatusCode::kDataLoss);
  EXPECT_EQ(SqliteResultToStatusCode(SQLITE_NOTADB), absl::StatusCode::kDataLoss);
  EXPECT_EQ(SqliteResultToStatusCode(SQLITE_CANTOPEN), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SqliteResultToStatusCode(SQLITE_MISUSE), absl::StatusCode::kInternal);
  EXPECT_EQ(SqliteResultToStatusCode(SQLITE_CONSTRAINT_PRIMARYKEY), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace ddp::storage
