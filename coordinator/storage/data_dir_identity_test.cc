#include "coordinator/storage/data_dir_identity.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "coordinator/storage/sqlite_database.h"
#include "gtest/gtest.h"

namespace ddp::storage {
namespace {

const std::vector<std::string> kDatabases = {"coordinator.db", "jobs.db"};

std::string MakeTempDir() {
  std::string pattern = ::testing::TempDir() + "/identity-XXXXXX";
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

// Puts a row into a database so it holds data, as a store would.
void WriteData(const std::string& path) {
  auto db = SqliteDatabase::Open(path);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Execute("CREATE TABLE IF NOT EXISTS t (v); INSERT INTO t VALUES (1)").ok());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  return text;
}

TEST(DataDirIdentityTest, EmptyDir_Initialises) {
  const std::string dir = MakeTempDir();
  auto id = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->size(), 36u);
  EXPECT_EQ(ReadFile(dir + "/IDENTITY"), *id);
  auto again = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *id);
}

TEST(DataDirIdentityTest, MissingDatabase_IsDataLossNamingTheFile) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(EnsureDataDirIdentity(dir, kDatabases).ok());
  ASSERT_EQ(std::remove((dir + "/coordinator.db").c_str()), 0);
  auto id = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_EQ(id.status().code(), absl::StatusCode::kDataLoss) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), dir + "/coordinator.db is missing"))
      << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "backup")) << id.status();
}

TEST(DataDirIdentityTest, TruncatedDatabase_IsDataLoss) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(EnsureDataDirIdentity(dir, kDatabases).ok());
  ASSERT_EQ(truncate((dir + "/jobs.db").c_str(), 0), 0);
  auto id = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_EQ(id.status().code(), absl::StatusCode::kDataLoss) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "jobs.db is empty (0 bytes)"))
      << id.status();
}

TEST(DataDirIdentityTest, DatabaseFromAnotherDir_IsDataLoss) {
  const std::string a = MakeTempDir();
  const std::string b = MakeTempDir();
  ASSERT_TRUE(EnsureDataDirIdentity(a, kDatabases).ok());
  ASSERT_TRUE(EnsureDataDirIdentity(b, kDatabases).ok());
  ASSERT_EQ(std::rename((a + "/coordinator.db").c_str(), (b + "/coordinator.db").c_str()), 0);
  auto id = EnsureDataDirIdentity(b, kDatabases);
  ASSERT_EQ(id.status().code(), absl::StatusCode::kDataLoss) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "another data dir")) << id.status();
}

TEST(DataDirIdentityTest, UnstampedDatabaseInInitialisedDir_IsDataLoss) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(EnsureDataDirIdentity(dir, kDatabases).ok());
  ASSERT_EQ(std::remove((dir + "/jobs.db").c_str()), 0);
  WriteData(dir + "/jobs.db");
  auto id = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_EQ(id.status().code(), absl::StatusCode::kDataLoss) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "carries no data dir identity"))
      << id.status();
}

TEST(DataDirIdentityTest, DirFromEarlierRelease_AdoptsAnIdentity) {
  const std::string dir = MakeTempDir();
  WriteData(dir + "/coordinator.db");
  WriteData(dir + "/jobs.db");
  auto id = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(ReadFile(dir + "/IDENTITY"), *id);
  // The data is still there.
  auto db = SqliteDatabase::Open(dir + "/coordinator.db");
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*(*db)->QueryInt64("SELECT count(*) FROM t"), 1);
}

TEST(DataDirIdentityTest, EarlierReleaseWithOneDatabaseMissing_IsDataLoss) {
  const std::string dir = MakeTempDir();
  WriteData(dir + "/jobs.db");
  auto id = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_EQ(id.status().code(), absl::StatusCode::kDataLoss) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "coordinator.db is missing")) << id.status();
}

TEST(DataDirIdentityTest, InterruptedInitialisation_IsFinished) {
  const std::string dir = MakeTempDir();
  auto id = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_TRUE(id.ok());
  // As if the process died after stamping the databases, before IDENTITY.
  ASSERT_EQ(std::remove((dir + "/IDENTITY").c_str()), 0);
  auto again = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *id);
}

// Issue 23.9: a used dir whose database was truncated to 0 bytes and whose
// IDENTITY is gone must not start as a new, empty store.
TEST(DataDirIdentityTest, ZeroByteDatabaseWithoutIdentity_IsDataLoss) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(EnsureDataDirIdentity(dir, kDatabases).ok());
  ASSERT_EQ(std::remove((dir + "/IDENTITY").c_str()), 0);
  for (const std::string& name : kDatabases) {
    std::ofstream(dir + "/" + name, std::ios::trunc).close();
  }
  auto id = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_EQ(id.status().code(), absl::StatusCode::kDataLoss) << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "coordinator.db is empty (0 bytes)"))
      << id.status();
  EXPECT_TRUE(absl::StrContains(id.status().message(), "has no IDENTITY")) << id.status();
  struct stat st;
  EXPECT_NE(stat((dir + "/IDENTITY").c_str(), &st), 0);  // nothing initialised
}

// A first start that died after creating a database file but before stamping
// it: the next start finishes with the same identity.
TEST(DataDirIdentityTest, InterruptedBeforeStamping_IsFinishedWithTheSameId) {
  const std::string dir = MakeTempDir();
  auto id = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_TRUE(id.ok());
  ASSERT_EQ(std::rename((dir + "/IDENTITY").c_str(), (dir + "/IDENTITY.initialising").c_str()), 0);
  std::ofstream(dir + "/coordinator.db", std::ios::trunc).close();
  ASSERT_EQ(std::remove((dir + "/jobs.db").c_str()), 0);
  auto again = EnsureDataDirIdentity(dir, kDatabases);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *id);
  struct stat st;
  EXPECT_NE(stat((dir + "/IDENTITY.initialising").c_str(), &st), 0);
}

TEST(DataDirIdentityTest, GarbledIdentityFile_IsDataLoss) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(EnsureDataDirIdentity(dir, kDatabases).ok());
  std::ofstream(dir + "/IDENTITY", std::ios::trunc) << "not an id\n";
  auto id = EnsureDataDirIdentity(dir, kDatabases);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kDataLoss) << id.status();
}

}  // namespace
}  // namespace ddp::storage
