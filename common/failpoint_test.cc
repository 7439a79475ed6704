#include "common/failpoint.h"

#include <stdlib.h>
#include <unistd.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

// Each case runs in a death-test child: the environment is read once per
// process, at its first hit (the parent never hits one).

TEST(FailpointDeathTest, Crash_ExitsWithTheFailpointCodeNamingIt) {
  EXPECT_EXIT(
      {
        setenv("DDP_FAILPOINTS", "commit_after_save=crash", 1);
        DDP_FAILPOINT("commit_before_save");  // not armed: passes
        DDP_FAILPOINT("commit_after_save");
      },
      ::testing::ExitedWithCode(kFailpointExitCode), "failpoint commit_after_save: crash");
}

TEST(FailpointDeathTest, CrashAtN_OnlyTheNthHitCrashes) {
  EXPECT_EXIT(
      {
        setenv("DDP_FAILPOINTS", "deliver_between_batches=crash@3", 1);
        DDP_FAILPOINT("deliver_between_batches");
        DDP_FAILPOINT("deliver_between_batches");
        write(STDERR_FILENO, "two passed\n", 11);
        DDP_FAILPOINT("deliver_between_batches");
        _exit(0);
      },
      ::testing::ExitedWithCode(kFailpointExitCode), "two passed");
}

TEST(FailpointDeathTest, UnknownName_RefusedAtTheFirstHit) {
  EXPECT_EXIT(
      {
        setenv("DDP_FAILPOINTS", "commit_afer_save=crash", 1);
        DDP_FAILPOINT("commit_after_save");
      },
      ::testing::ExitedWithCode(2), "unknown failpoint 'commit_afer_save'");
}

TEST(FailpointDeathTest, Unarmed_Passes) {
  EXPECT_EXIT(
      {
        unsetenv("DDP_FAILPOINTS");
        DDP_FAILPOINT("commit_after_save");
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(FailpointDeathTest, Sleep_PausesTheCaller) {
  EXPECT_EXIT(
      {
        setenv("DDP_FAILPOINTS", "commit_before_save=sleep(100)", 1);
        const absl::Time start = absl::Now();
        DDP_FAILPOINT("commit_before_save");
        _exit(absl::Now() - start >= absl::Milliseconds(100) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ddp
