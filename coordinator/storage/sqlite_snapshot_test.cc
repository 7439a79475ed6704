// CopySqliteDatabase: the copy opens as a database with what was committed,
// while the source stays open and writable; an existing target is refused.

#include "coordinator/storage/sqlite_snapshot.h"

#include <stdlib.h>

#include <memory>
#include <string>

#include "coordinator/storage/sqlite_database.h"
#include "gtest/gtest.h"

namespace ddp::storage {
namespace {

std::string TempDir() {
  std::string dir = std::string(getenv("TEST_TMPDIR")) + "/snapXXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

TEST(CopySqliteDatabase, WhileOpen_CopyHoldsTheCommittedRows) {
  const std::string dir = TempDir();
  auto source = SqliteDatabase::Open(dir + "/coordinator.db");
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_TRUE((*source)->Execute("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (7)").ok());
  ASSERT_TRUE(CopySqliteDatabase(dir + "/coordinator.db", dir + "/copy.db").ok());
  // The source still takes writes; the copy does not see them.
  ASSERT_TRUE((*source)->Execute("INSERT INTO t VALUES (8)").ok());
  SqliteDatabaseOptions existing;
  existing.create_if_missing = false;
  auto copy = SqliteDatabase::Open(dir + "/copy.db", existing);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(*(*copy)->QueryInt64("SELECT sum(v) FROM t"), 7);
  EXPECT_EQ(*(*source)->QueryInt64("SELECT sum(v) FROM t"), 15);
}

TEST(CopySqliteDatabase, TargetExists_AlreadyExists) {
  const std::string dir = TempDir();
  auto source = SqliteDatabase::Open(dir + "/coordinator.db");
  ASSERT_TRUE(source.ok());
  ASSERT_TRUE((*source)->Execute("CREATE TABLE t (v INTEGER)").ok());
  ASSERT_TRUE(CopySqliteDatabase(dir + "/coordinator.db", dir + "/copy.db").ok());
  absl::Status again = CopySqliteDatabase(dir + "/coordinator.db", dir + "/copy.db");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
}

TEST(CopySqliteDatabase, NoSource_FailedPrecondition) {
  const std::string dir = TempDir();
  absl::Status missing = CopySqliteDatabase(dir + "/none.db", dir + "/copy.db");
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition) << missing;
}

}  // namespace
}  // namespace ddp::storage
