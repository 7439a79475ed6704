#include "coordinator/server/data_dir_lock.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::server {
namespace {

std::string TempDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

TEST(DataDirLockTest, Acquire_NewNestedDir_CreatesAndRecordsPid) {
  const std::string dir = TempDir("nested/a/b");
  auto lock = DataDirLock::Acquire(dir);
  ASSERT_TRUE(lock.ok()) << lock.status();
  std::ifstream in(dir + "/LOCK");
  int pid = 0;
  in >> pid;
  EXPECT_EQ(pid, getpid());
}

TEST(DataDirLockTest, Acquire_Twice_SecondRefusedUntilReleased) {
  const std::string dir = TempDir("twice");
  auto first = DataDirLock::Acquire(dir);
  ASSERT_TRUE(first.ok());
  auto second = DataDirLock::Acquire(dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), ::testing::HasSubstr(std::to_string(getpid())));
  first->reset();
  EXPECT_TRUE(DataDirLock::Acquire(dir).ok());
}

TEST(DataDirLockTest, Acquire_PathIsAFile_FailedPrecondition) {
  const std::string path = TempDir("plain_file");
  std::ofstream(path) << "x";
  EXPECT_EQ(DataDirLock::Acquire(path).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ddp::server
