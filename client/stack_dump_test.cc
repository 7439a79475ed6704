#include "client/stack_dump.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

// Two threads parked in functions of their own, so the dump names both.
constexpr char kScript[] = R"py(
import threading, time

def parked_helper():
    time.sleep(60)

def parked_main():
    time.sleep(60)

threading.Thread(target=parked_helper, daemon=True).start()
parked_main()
)py";

std::string SiteDir() {
  return absl::StrCat(getenv("TEST_SRCDIR"), "/", getenv("TEST_WORKSPACE"), "/client/prewarm");
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class StackDumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    mkdir(dir_.c_str(), 0755);
    dump_file_ = dir_ + "/stacks";
    script_ = dir_ + "/parked.py";
    std::ofstream(script_) << kScript;
  }
  void TearDown() override {
    for (pid_t pid : children_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

  // Starts `argv` as its own process-group leader, as the supervisor does
  // (or in `group`, as an interactive run's workers share one), with
  // DDP_STACK_DUMP_FILE and the agent's sitecustomize.py on PYTHONPATH.
  pid_t Start(std::vector<std::string> argv, pid_t group = 0) {
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, group);
      setenv("PYTHONPATH", SiteDir().c_str(), 1);
      setenv("DDP_STACK_DUMP_FILE", dump_file_.c_str(), 1);
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    setpgid(pid, group == 0 ? pid : group);  // as the child: no race with the next Start
    children_.push_back(pid);
    return pid;
  }

  void AwaitRegistration(pid_t pid) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (RegisteredStackDumpPid(ReadAll(dump_file_)) != pid) {
      ASSERT_LT(absl::Now(), deadline) << "no registration line in " << dump_file_;
      absl::SleepFor(absl::Milliseconds(10));
    }
    absl::SleepFor(absl::Milliseconds(100));  // faulthandler.register follows the line
  }

  bool Alive(pid_t pid) { return waitpid(pid, nullptr, WNOHANG) == 0; }

  StackDump CollectOne(pid_t pid) {
    std::vector<StackDump> dumps =
        CollectStackDumps({{0, 3, pid, dump_file_}}, {}, MonotonicClock::Get());
    EXPECT_EQ(dumps.size(), 1u);
    return dumps.empty() ? StackDump{} : dumps[0];
  }

  std::string dir_;
  std::string dump_file_;
  std::string script_;
  std::vector<pid_t> children_;
};

TEST(RegisteredStackDumpPidTest, Lines_Parsed) {
  const std::string good = absl::StrCat("ddp-stack-dump pid=42 signal=", kStackDumpSignal, "\n");
  EXPECT_EQ(RegisteredStackDumpPid(good), 42);
  EXPECT_EQ(RegisteredStackDumpPid(good + "Thread 0x1 (most recent call first):\n"), 42);
  EXPECT_EQ(RegisteredStackDumpPid("ddp-stack-dump pid=42 signal=10"), -1);  // incomplete
  EXPECT_EQ(RegisteredStackDumpPid("ddp-stack-dump pid=42 signal=15\n"), -1);
  EXPECT_EQ(RegisteredStackDumpPid("ddp-stack-dump pid=0 signal=12\n"), -1);
  EXPECT_EQ(RegisteredStackDumpPid("hello\n"), -1);
  EXPECT_EQ(RegisteredStackDumpPid(""), -1);
}

TEST_F(StackDumpTest, PythonWorker_EveryThreadShown_KeepsRunning) {
  const pid_t pid = Start({kPython, "-u", script_});
  AwaitRegistration(pid);
  const StackDump dump = CollectOne(pid);
  ASSERT_TRUE(dump.status.ok()) << dump.status;
  EXPECT_EQ(dump.global_rank, 3);
  EXPECT_EQ(dump.pid, pid);
  EXPECT_TRUE(absl::StrContains(dump.text, "in parked_main")) << dump.text;
  EXPECT_TRUE(absl::StrContains(dump.text, "in parked_helper")) << dump.text;
  EXPECT_FALSE(absl::StrContains(dump.text, "ddp-stack-dump")) << dump.text;
  EXPECT_TRUE(Alive(pid));

  // A second request gets a dump of its own, not the first one again.
  const StackDump again = CollectOne(pid);
  ASSERT_TRUE(again.status.ok()) << again.status;
  EXPECT_EQ(again.text, dump.text);
  EXPECT_EQ(ReadAll(dump_file_).size(),
            absl::StrCat("ddp-stack-dump pid=", pid, " signal=", kStackDumpSignal, "\n").size() +
                2 * dump.text.size());
  EXPECT_TRUE(Alive(pid));
}

// A launcher shell that runs Python as its child, in a group led by another
// worker (an interactive run): the interpreter descends from the worker, so
// it is signalled.
TEST_F(StackDumpTest, LauncherInSharedGroup_InterpreterChildSignalled) {
  const pid_t leader = Start({"/bin/sleep", "60"});
  const pid_t launcher =
      Start({"/bin/sh", "-c", std::string(kPython) + " -u " + script_ + "; true"}, leader);
  ASSERT_EQ(getpgid(launcher), leader);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  pid_t interpreter = -1;
  while ((interpreter = RegisteredStackDumpPid(ReadAll(dump_file_))) < 0) {
    ASSERT_LT(absl::Now(), deadline) << "no registration line in " << dump_file_;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_NE(interpreter, launcher);
  AwaitRegistration(interpreter);
  const StackDump dump = CollectOne(launcher);
  ASSERT_TRUE(dump.status.ok()) << dump.status;
  EXPECT_EQ(dump.pid, interpreter);
  EXPECT_TRUE(absl::StrContains(dump.text, "in parked_main")) << dump.text;
}

TEST_F(StackDumpTest, ChildProcesses_DoNotInheritTheFile) {
  const std::string spawner = dir_ + "/spawner.py";
  const std::string seen = dir_ + "/seen";
  std::ofstream(spawner) << "import os, time\n"
                            "open('"
                         << seen
                         << "', 'w').write(\n"
                            "    os.environ.get('DDP_STACK_DUMP_FILE', 'unset'))\n"
                            "time.sleep(60)\n";
  const pid_t pid = Start({kPython, "-u", spawner});
  AwaitRegistration(pid);
  // What the script starts inherits its environment: without the variable,
  // it cannot register into the worker's file.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (ReadAll(seen).empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(ReadAll(seen), "unset");
}

TEST_F(StackDumpTest, NotRegistered_NotSignalled) {
  const pid_t pid = Start({"/bin/sleep", "60"});
  absl::SleepFor(absl::Milliseconds(100));
  const StackDump dump = CollectOne(pid);
  EXPECT_EQ(dump.status.code(), absl::StatusCode::kFailedPrecondition) << dump.status;
  EXPECT_TRUE(absl::StrContains(dump.status.message(), "no stack dump handler")) << dump.status;
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(Alive(pid));  // SIGUSR2 would have killed it
}

TEST_F(StackDumpTest, ForeignRegistration_NotSignalled) {
  const pid_t pid = Start({"/bin/sleep", "60"});
  // A line left by some other process (pid 1 is in no worker's group).
  std::ofstream(dump_file_) << "ddp-stack-dump pid=1 signal=" << kStackDumpSignal << "\n";
  const StackDump dump = CollectOne(pid);
  EXPECT_EQ(dump.status.code(), absl::StatusCode::kFailedPrecondition) << dump.status;
  EXPECT_TRUE(Alive(pid));
}

TEST_F(StackDumpTest, StoppedProcess_Named) {
  const pid_t pid = Start({kPython, "-u", script_});
  AwaitRegistration(pid);
  kill(pid, SIGSTOP);
  absl::SleepFor(absl::Milliseconds(100));
  const StackDump dump = CollectOne(pid);
  EXPECT_EQ(dump.status.code(), absl::StatusCode::kFailedPrecondition) << dump.status;
  EXPECT_TRUE(absl::StrContains(dump.status.message(), "stopped")) << dump.status;
  kill(pid, SIGCONT);
}

TEST_F(StackDumpTest, HandlerReplaced_DeadlineExceeded) {
  const std::string script = dir_ + "/ignores.py";
  std::ofstream(script) << "import signal, time\n"
                           "signal.signal(signal.SIGUSR2, signal.SIG_IGN)\n"
                           "time.sleep(60)\n";
  const pid_t pid = Start({kPython, "-u", script});
  AwaitRegistration(pid);
  StackDumpOptions options;
  options.timeout = absl::Milliseconds(300);
  const std::vector<StackDump> dumps =
      CollectStackDumps({{0, 0, pid, dump_file_}}, options, MonotonicClock::Get());
  ASSERT_EQ(dumps.size(), 1u);
  EXPECT_EQ(dumps[0].status.code(), absl::StatusCode::kDeadlineExceeded) << dumps[0].status;
  EXPECT_TRUE(Alive(pid));
}

TEST_F(StackDumpTest, GoneProcess_NotFound) {
  const StackDump dump = CollectOne(999999999);
  EXPECT_EQ(dump.status.code(), absl::StatusCode::kNotFound) << dump.status;
}

}  // namespace
}  // namespace ddp::client
