#include "tests/e2e/process_table.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp::testing {
namespace {

// Forks a child that forks a grandchild; both sleep. Returns the child.
pid_t StartChildWithGrandchild() {
  const pid_t child = fork();
  if (child == 0) {
    if (fork() == 0) {
      execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
      _exit(127);
    }
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  return child;
}

bool WaitFor(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

TEST(ProcessTable, ReadProcessTable_ContainsSelfWithParentAndGroup) {
  const auto table = ReadProcessTable();
  auto self = table.find(getpid());
  ASSERT_NE(self, table.end());
  EXPECT_EQ(self->second.ppid, getppid());
  EXPECT_EQ(self->second.pgid, getpgrp());
  EXPECT_EQ(self->second.state, 'R');
}

TEST(ProcessTable, EnvironmentOf_Self_ExactNameOnly) {
  setenv("DDP_E2E_RANK", "3", 1);
  setenv("DDP_E2E_LOCAL_RANK", "1", 1);
  // Read from /proc, which shows the environment the process started with.
  const pid_t child = fork();
  if (child == 0) {
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_TRUE(WaitFor([&] { return EnvironmentOf(child, "DDP_E2E_RANK") == "3"; }));
  EXPECT_EQ(EnvironmentOf(child, "DDP_E2E_LOCAL_RANK"), "1");
  EXPECT_EQ(EnvironmentOf(child, "E2E_RANK"), "");
  KillAndReapDescendants(absl::Seconds(10));
}

TEST(ProcessTable, Descendants_ChildAndGrandchild_BothFound) {
  const pid_t child = StartChildWithGrandchild();
  ASSERT_GT(child, 0);
  std::set<pid_t> found;
  EXPECT_TRUE(WaitFor([&] {
    found = Descendants(ReadProcessTable(), getpid());
    return found.size() == 2;
  }));
  EXPECT_EQ(found.count(child), 1u);
  EXPECT_EQ(Descendants(ReadProcessTable(), child).size(), 1u);
  EXPECT_EQ(KillAndReapDescendants(absl::Seconds(10)), 2);
}

TEST(ProcessTable, NoLongerRuns_KilledChild_TrueAndReaped) {
  const pid_t child = StartChildWithGrandchild();
  ASSERT_GT(child, 0);
  EXPECT_FALSE(NoLongerRuns(child));
  kill(child, SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return NoLongerRuns(child); }));
  EXPECT_TRUE(AbsentFromProcessTable(child));  // reaped by NoLongerRuns
  KillAndReapDescendants(absl::Seconds(10));
}

TEST(ProcessTable, Subreaper_OrphanedGrandchild_ComesBackAndIsSwept) {
  ASSERT_TRUE(MakeSubreaper());
  const pid_t child = StartChildWithGrandchild();
  ASSERT_GT(child, 0);
  ASSERT_TRUE(WaitFor([&] { return Descendants(ReadProcessTable(), child).size() == 1; }));
  const pid_t grandchild = *Descendants(ReadProcessTable(), child).begin();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // The orphan is now the test's child, so the sweep still finds it.
  EXPECT_TRUE(WaitFor([&] { return ReadProcessTable()[grandchild].ppid == getpid(); }));
  EXPECT_EQ(KillAndReapDescendants(absl::Seconds(10)), 1);
  EXPECT_TRUE(AbsentFromProcessTable(grandchild));
}

}  // namespace
}  // namespace ddp::testing
