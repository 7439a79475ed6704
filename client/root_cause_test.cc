#include "client/root_cause.h"

#include <signal.h>

#include "client/worker_failure.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);  // 2023-11-14_22:13:20 UTC

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
  std::vector<WorkerFailure> failures = {Failure("b", 3, kT0 + absl::Seconds(2)),
                                         Failure("a", 1, kT0), Failure("a", 0, kT0)};
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
  const std::string expected = rule + "\ntrain.py FAILED\n" + thin + "\nFailures:\n" +
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
  EXPECT_EQ(OneLineFailure(segv), "n1 rank 5 (local_rank 1): signal SIGSEGV: first");
  WorkerFailure hang = Failure("n2", 2, kT0);
  hang.kind = WorkerFailure::Kind::kHang;
  hang.silent_for = absl::Seconds(30);
  EXPECT_EQ(OneLineFailure(hang), "n2 rank 2 (local_rank 0): hang: no heartbeat for 30.0 s");
  hang.knock_on_of_rank = 3;
  EXPECT_EQ(OneLineFailure(hang),
            "n2 rank 2 (local_rank 0): hang: no heartbeat for 30.0 s "
            "(knock-on of rank 3's hang)");
}

TEST(RootCauseTest, FormatFailureSummary_MessageRepeatsCause_DefaultTraceback) {
  WorkerFailure remote = Failure("node-a", 1, kT0);
  remote.exit_code = 1;
  remote.message = "exit code 1";  // what the agent sent without error file
  const std::string text = FormatFailureSummary("t", {remote});
  EXPECT_NE(text.find("  traceback : <N/A> (no error file, nothing on stderr)"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("To enable traceback"), std::string::npos) << text;
}

TEST(RootCauseTest, FormatFailureSummary_StderrTailNoTraceback_TailAndLogsInPlaceOfDocsLink) {
  WorkerFailure f = Failure("node-a", 1, kT0);
  f.exit_code = 2;
  f.stderr_tail = "/usr/bin/python3: can't open file 'trian.py': No such file\n";
  f.log_path = "/tmp/ddp_j/attempt_1/0/stderr.log";
  const std::string text = FormatFailureSummary("trian.py", {f});
  EXPECT_NE(text.find("  traceback : last lines of stderr:\n"
                      "              /usr/bin/python3: can't open file 'trian.py'"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  logs      : node-a:/tmp/ddp_j/attempt_1/0/stderr.log\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("To enable traceback"), std::string::npos) << text;
}

TEST(RootCauseTest, FormatFailureSummary_TracebackFromStderr_Shown) {
  WorkerFailure f = Failure("node-a", 1, kT0);
  f.exit_code = 1;
  f.traceback = "Traceback (most recent call last):\n  File \"t.py\", line 1\nValueError: x";
  const std::string text = FormatFailureSummary("t.py", {f});
  EXPECT_NE(text.find("  traceback : Traceback (most recent call last):\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ValueError: x"), std::string::npos) << text;
}

TEST(RootCauseTest, FormatFailureSummary_PidUnknown_LeftOut) {
  WorkerFailure remote = Failure("node-b", 3, kT0);
  remote.pid = 0;
  remote.kind = WorkerFailure::Kind::kSignal;
  remote.signal = SIGKILL;
  const std::string text = FormatFailureSummary("t", {remote});
  EXPECT_EQ(text.find("pid"), std::string::npos) << text;
  EXPECT_NE(text.find("  exitcode  : -9\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  traceback : Signal 9 (SIGKILL) received\n"), std::string::npos) << text;
}

TEST(RootCauseTest, FormatFailureSummary_Hang_ShownAsHangNotExitCode) {
  WorkerFailure hang = Failure("node-a", 1, kT0);
  hang.kind = WorkerFailure::Kind::kHang;
  hang.silent_for = absl::Milliseconds(5040);
  const std::string text = FormatFailureSummary("train.py", {hang});
  EXPECT_NE(text.find("  exitcode  : hang: no heartbeat for 5.0 s (pid: 1001)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("exitcode  : 0"), std::string::npos) << text;
  EXPECT_EQ(text.find("exitcode  : -1"), std::string::npos) << text;
  // From another node the duration is unknown: the agent's message says it.
  WorkerFailure remote = hang;
  remote.silent_for = absl::ZeroDuration();
  remote.pid = 0;
  remote.message = "hang: no heartbeat for 3.1 s";
  const std::string remote_text = FormatFailureSummary("train.py", {remote});
  EXPECT_NE(remote_text.find("  exitcode  : hang\n"), std::string::npos) << remote_text;
  EXPECT_NE(remote_text.find("  traceback : hang: no heartbeat for 3.1 s\n"), std::string::npos)
      << remote_text;
}

TEST(RootCauseTest, FormatFailureSummary_ExplicitRoot_OthersByTime) {
  const WorkerFailure late = Failure("b", 2, kT0 + absl::Seconds(2));
  const WorkerFailure early = Failure("b", 3, kT0);
  const WorkerFailure chosen = Failure("a", 1, kT0 + absl::Seconds(1));
  const std::string text = FormatFailureSummary("t", {chosen, late, early}, 0);
  const size_t root = text.find("Root Cause");
  ASSERT_NE(root, std::string::npos);
  EXPECT_NE(text.find("rank      : 1 (local_rank: 1)", root), std::string::npos) << text;
  const size_t first = text.find("[1]:");
  const size_t second = text.find("[2]:");
  ASSERT_LT(second, root);
  EXPECT_NE(text.substr(first, second - first).find("rank      : 3"), std::string::npos) << text;
  EXPECT_NE(text.substr(second, root - second).find("rank      : 2"), std::string::npos) << text;
}

TEST(RootCauseTest, RootCauseIndex_KnockOnHangNeverRootWhenOthersFailed) {
  WorkerFailure blocked = Failure("a", 0, kT0);
  blocked.kind = WorkerFailure::Kind::kHang;
  blocked.knock_on_of_rank = 1;
  WorkerFailure exited = Failure("b", 2, kT0 + absl::Seconds(5));
  EXPECT_EQ(RootCauseIndex({blocked, exited}), 1);
  EXPECT_EQ(RootCauseIndex({blocked}), 0);
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
