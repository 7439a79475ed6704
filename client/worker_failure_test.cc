#include "client/worker_failure.h"

#include <signal.h>

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

WorkerExit Exited(int code, absl::Time seen) {
  WorkerExit exit;
  exit.kind = WorkerExit::Kind::kExited;
  exit.exit_code = code;
  exit.time = seen;
  return exit;
}

WorkerExit WithStamp(WorkerExit exit, const std::string& timestamp) {
  exit.error = ErrorFileContent{"RuntimeError: boom", "", timestamp};
  return exit;
}

TEST(FailureTimeTest, NoErrorFile_ExitTime) {
  EXPECT_EQ(FailureTime(Exited(1, kT0 + absl::Milliseconds(300))), kT0 + absl::Milliseconds(300));
}

TEST(FailureTimeTest, ErrorFileStamp_PreferredOverLaterExit) {
  // The worker raised at kT0 and took 4 s to shut down.
  const WorkerExit exit = WithStamp(Exited(1, kT0 + absl::Seconds(4)), "1700000000");
  EXPECT_EQ(FailureTime(exit), kT0);
  const WorkerExit fraction = WithStamp(Exited(1, kT0 + absl::Seconds(4)), "1700000000.5");
  EXPECT_EQ(FailureTime(fraction), kT0 + absl::Milliseconds(500));
}

TEST(FailureTimeTest, WholeSecondStamp_ExitInThatSecond_ExitTimeRefinesIt) {
  const WorkerExit exit = WithStamp(Exited(1, kT0 + absl::Milliseconds(700)), "1700000000");
  EXPECT_EQ(FailureTime(exit), kT0 + absl::Milliseconds(700));
}

TEST(FailureTimeTest, StampAfterExitOrJunk_ExitTime) {
  EXPECT_EQ(FailureTime(WithStamp(Exited(1, kT0), "1700000009")), kT0);
  EXPECT_EQ(FailureTime(WithStamp(Exited(1, kT0), "soon")), kT0);
  EXPECT_EQ(FailureTime(WithStamp(Exited(1, kT0), "")), kT0);
}

TEST(FailureTimeTest, Hang_LastHeartbeat) {
  WorkerExit hang;
  hang.kind = WorkerExit::Kind::kHung;
  hang.time = kT0 + absl::Seconds(5);
  hang.last_heartbeat = kT0;
  hang.silent_for = absl::Seconds(5);
  EXPECT_EQ(FailureTime(hang), kT0);
  EXPECT_EQ(ToWorkerFailure(hang, "n").time, kT0);
  EXPECT_EQ(hang.Describe(), "hang: no heartbeat for 5.0 s");
}

TEST(CausedByStopTest, OnlyTheAgentsSignalsAfterTheStopBegan) {
  WorkerExit term;
  term.kind = WorkerExit::Kind::kSignaled;
  term.signal = SIGTERM;
  EXPECT_FALSE(CausedByStop(term));  // before any stop: someone else's
  term.during_stop = true;
  EXPECT_TRUE(CausedByStop(term));
  WorkerExit shell = Exited(128 + SIGKILL, kT0);
  shell.during_stop = true;
  EXPECT_TRUE(CausedByStop(shell));
  WorkerExit own = Exited(1, kT0);  // exited 1 on its own, seen late
  own.during_stop = true;
  EXPECT_FALSE(CausedByStop(own));
  WorkerExit segv;
  segv.kind = WorkerExit::Kind::kSignaled;
  segv.signal = SIGSEGV;
  segv.during_stop = true;
  EXPECT_FALSE(CausedByStop(segv));
}

TEST(ToWorkerFailureTest, KnockOnHang_CarriesTheCulpritsRank) {
  WorkerExit hang;
  hang.kind = WorkerExit::Kind::kHung;
  hang.global_rank = 0;
  hang.pid = 321;
  hang.knock_on_of_rank = 1;
  hang.silent_for = absl::Seconds(3);
  const WorkerFailure f = ToWorkerFailure(hang, "node-a");
  EXPECT_EQ(f.kind, WorkerFailure::Kind::kHang);
  EXPECT_EQ(f.knock_on_of_rank, 1);
  EXPECT_EQ(f.pid, 321);
  EXPECT_EQ(f.silent_for, absl::Seconds(3));
}

}  // namespace
}  // namespace ddp::client
