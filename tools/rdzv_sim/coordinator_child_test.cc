#include "tools/rdzv_sim/coordinator_child.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddp::rdzv_sim {
namespace {

// A stand-in for the coordinator: a shell script that honours --port-file.
std::string WriteScript(const std::string& dir, const std::string& body) {
  const std::string path = absl::StrCat(dir, "/fake_coordinator.sh");
  std::ofstream out(path);
  out << "#!/bin/sh\n" << body;
  out.close();
  chmod(path.c_str(), 0755);
  return path;
}

std::string TempDir() {
  std::string pattern =
      absl::StrCat(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp", "/child.XXXXXX");
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

TEST(CoordinatorChild, Start_ScriptWritesPortFile_ReportsPortAndPid) {
  const std::string dir = TempDir();
  CoordinatorChildOptions options;
  // $4 is the port file (BINARY --port 0 --port-file FILE ...).
  options.binary = WriteScript(dir, "echo 4321 > \"$4\"\nexec sleep 30\n");
  options.data_dir = dir + "/data";
  options.work_dir = dir;
  absl::StatusOr<std::unique_ptr<CoordinatorChild>> child = CoordinatorChild::Start(options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ((*child)->port(), 4321);
  EXPECT_EQ((*child)->target(), "127.0.0.1:4321");
  const pid_t pid = (*child)->pid();
  ASSERT_GT(pid, 0);
  EXPECT_EQ(kill(pid, 0), 0);
  (*child)->Stop();
  EXPECT_EQ((*child)->pid(), -1);
  EXPECT_NE(kill(pid, 0), 0);  // reaped
}

TEST(CoordinatorChild, Start_ProcessExitsEarly_Unavailable) {
  const std::string dir = TempDir();
  CoordinatorChildOptions options;
  options.binary = WriteScript(dir, "echo boom >&2\nexit 3\n");
  options.data_dir = dir + "/data";
  options.work_dir = dir;
  absl::StatusOr<std::unique_ptr<CoordinatorChild>> child = CoordinatorChild::Start(options);
  EXPECT_EQ(child.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(child.status().message().find("status 3"), std::string::npos) << child.status();
}

TEST(CoordinatorChild, Start_NotExecutable_FailedPrecondition) {
  CoordinatorChildOptions options;
  options.binary = "/nonexistent/coordinator";
  options.work_dir = TempDir();
  EXPECT_EQ(CoordinatorChild::Start(options).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ddp::rdzv_sim
