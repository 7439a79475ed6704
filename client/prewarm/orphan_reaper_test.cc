#include "client/prewarm/orphan_reaper.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(20);

bool InProcessTable(pid_t pid) { return access(absl::StrCat("/proc/", pid).c_str(), F_OK) == 0; }

// A child (leading its own group) that forks a grandchild and exits at once;
// the grandchild, orphaned, sleeps 100 ms and exits (with `new_session`
// after setsid()). Returns the grandchild's pid; the child is reaped here.
pid_t OrphanGrandchild(bool new_session) {
  int report[2];
  EXPECT_EQ(pipe(report), 0);
  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      if (new_session) setsid();
      usleep(100 * 1000);
      _exit(0);
    }
    (void)!write(report[1], &grandchild, sizeof(grandchild));
    _exit(0);
  }
  close(report[1]);
  pid_t grandchild = -1;
  EXPECT_EQ(read(report[0], &grandchild, sizeof(grandchild)),
            static_cast<ssize_t>(sizeof(grandchild)));
  close(report[0]);
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, 0), child);  // a group leader: left to us
  return grandchild;
}

bool AwaitGone(pid_t pid) {
  const absl::Time deadline = absl::Now() + kDeadline;
  while (InProcessTable(pid) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  return !InProcessTable(pid);
}

TEST(OrphanReaperTest, OrphanInItsParentsGroup_Reaped) {
  absl::StatusOr<std::unique_ptr<OrphanReaper>> reaper = OrphanReaper::Create();
  ASSERT_TRUE(reaper.ok()) << reaper.status();
  const pid_t orphan = OrphanGrandchild(/*new_session=*/false);
  ASSERT_GT(orphan, 0);
  EXPECT_TRUE(AwaitGone(orphan)) << "a zombie nobody reaps: pid " << orphan;
  EXPECT_GE((*reaper)->reaped(), 1);
}

TEST(OrphanReaperTest, OrphanThatLeadsASession_Reaped) {
  absl::StatusOr<std::unique_ptr<OrphanReaper>> reaper = OrphanReaper::Create();
  ASSERT_TRUE(reaper.ok()) << reaper.status();
  const pid_t orphan = OrphanGrandchild(/*new_session=*/true);
  ASSERT_GT(orphan, 0);
  EXPECT_TRUE(AwaitGone(orphan)) << "a zombie nobody reaps: pid " << orphan;
}

// A child leading its own group (a worker, a standby) is its owner's to
// reap: its exit status stays for waitpid(pid).
TEST(OrphanReaperTest, ChildThatLeadsItsGroup_LeftForItsOwnersWaitpid) {
  absl::StatusOr<std::unique_ptr<OrphanReaper>> reaper = OrphanReaper::Create();
  ASSERT_TRUE(reaper.ok()) << reaper.status();
  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    _exit(7);
  }
  setpgid(child, child);
  // Many polls of the reaper's thread, and one here.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ((*reaper)->ReapOnce(), 0);
  // That zombie left in place does not keep an orphan from being reaped.
  const pid_t orphan = OrphanGrandchild(/*new_session=*/false);
  ASSERT_GT(orphan, 0);
  EXPECT_TRUE(AwaitGone(orphan)) << "a zombie nobody reaps: pid " << orphan;
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

TEST(OrphanReaperTest, Destroyed_NoLongerASubreaper) {
  {
    absl::StatusOr<std::unique_ptr<OrphanReaper>> reaper = OrphanReaper::Create();
    ASSERT_TRUE(reaper.ok()) << reaper.status();
    int on = 0;
    ASSERT_EQ(prctl(PR_GET_CHILD_SUBREAPER, &on), 0);
    EXPECT_EQ(on, 1);
  }
  int on = 1;
  ASSERT_EQ(prctl(PR_GET_CHILD_SUBREAPER, &on), 0);
  EXPECT_EQ(on, 0);
}

}  // namespace
}  // namespace ddp::client
