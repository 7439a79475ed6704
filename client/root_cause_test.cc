#include "client/root_cause.h"

#include <signal.h>

#include "client/worker_failure.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

const absl::Time kT0 =
    absl::FromUnixSeconds(1700000000);  // 2023-11-14_22:13:20 UTC

WorkerFailure Failure(const std::string& node, int rank, absl::Time time) {
  WorkerFailure f;
  f.node = node;
  f.global_rank = rank;
  f.local_rank = rank % 2;
  f.pid = 1000 + rank;
  f.time = time;
  return f;
}

TEST(RootCauseTest, RootCauseIndex_EarliestWins_TieToLowerRank) {
  std::vector<WorkerFailure> failures = {
      Failure("b", 3, kT0 + absl::Seconds(2)), Failure("a", 1, kT0),
      Failure("a", 0, kT0)};
  EXPECT_EQ(RootCauseIndex(failures), 2);
  EXPECT_EQ(RootCauseIndex({}), -1);
}

TEST(RootCauseTest, FormatFailureSummary_TwoFailures_TorchrunLayout) {
  WorkerFailure killed = Failure("node-b", 3, kT0 + absl::Seconds(1));
  killed.kind = WorkerFailure::Kind::kSignal;
  killed.signal = SIGKILL;
  WorkerFailure raised = Failure("node-a", 0, kT0);
  raised.exit_code = 1;
  raised.message = "RuntimeError: boom";
  raised.traceback = "Traceback:\n  line 1";
  raised.error_file = "/l/attempt_0/0/error.json";

  const std::string text = FormatFailureSummary("train.py", {killed, raised});
  const std::string rule(60, '='), thin(60, '-');
  const std::string expected =
      rule + "\ntrain.py FAILED\n" + thin + "\nFailures:\n" +
      "[1]:\n"
      "  time      : 2023-11-14_22:13:21\n"
      "  host      : node-b\n"
      "  rank      : 3 (local_rank: 1)\n"
      "  exitcode  : -9 (pid: 1003)\n"
      "  error_file: <N/A>\n"
      "  traceback : Signal 9 (SIGKILL) received by PID 1003\n" +
      thin + "\nRoot Cause (first observed failure):\n" +
      "[0]:\n"
      "  time      : 2023-11-14_22:13:20\n"
      "  host      : node-a\n"
      "  rank      : 0 (local_rank: 0)\n"
      "  exitcode  : 1 (pid: 1000)\n"
      "  error_file: /l/attempt_0/0/error.json\n"
      "  traceback : Traceback:\n"
      "                line 1\n" +
      rule + "\n";
  EXPECT_EQ(text, expected);
}

TEST(RootCauseTest, FormatFailureSummary_OneFailure_NoOtherFailures) {
  const std::string text = FormatFailureSummary("t", {Failure("n", 0, kT0)});
  EXPECT_NE(text.find("<NO_OTHER_FAILURES>"), std::string::npos);
  EXPECT_NE(text.find("exitcode  : 0"), std::string::npos);
}

TEST(RootCauseTest, OneLineFailure_SignalAndHang_NamedReadably) {
  WorkerFailure segv = Failure("n1", 5, kT0);
  segv.kind = WorkerFailure::Kind::kSignal;
  segv.signal = SIGSEGV;
  segv.message = "first\nsecond";
  EXPECT_EQ(OneLineFailure(segv),
            "n1 rank 5 (local_rank 1): signal SIGSEGV: first");
  WorkerFailure hang = Failure("n2", 2, kT0);
  hang.kind = WorkerFailure::Kind::kHang;
  hang.silent_for = absl::Seconds(30);
  EXPECT_EQ(OneLineFailure(hang),
            "n2 rank 2 (local_rank 0): hang (no heartbeat for 30s)");
}

TEST(ToWorkerFailureTest, FromExit_CopiesFieldsAndErrorFile) {
  WorkerExit exit;
  exit.kind = WorkerExit::Kind::kSignaled;
  exit.signal = SIGABRT;
  exit.global_rank = 4;
  exit.local_rank = 0;
  exit.pid = 77;
  exit.time = kT0;
  exit.error = ErrorFileContent{"boom", "tb", ""};
  exit.error_file = "/e.json";
  WorkerFailure f = ToWorkerFailure(exit, "host-x");
  EXPECT_EQ(f.kind, WorkerFailure::Kind::kSignal);
  EXPECT_EQ(f.signal, SIGABRT);
  EXPECT_EQ(f.node, "host-x");
  EXPECT_EQ(f.global_rank, 4);
  EXPECT_EQ(f.message, "boom");
  EXPECT_EQ(f.traceback, "tb");
  EXPECT_EQ(f.error_file, "/e.json");
  EXPECT_EQ(exit.Describe(), "signal SIGABRT");
}

}  // namespace
}  // namespace ddp::client
