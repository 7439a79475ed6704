#include "client/worker_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/worker_process.h"
#include "common/clock.h"
#include "common/proc_stats.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

// Loose upper bound for "promptly" with real processes on a loaded 2-core
// machine.
constexpr absl::Duration kPrompt = absl::Seconds(5);

std::string TestDir(const std::string& name) {
  return absl::StrCat(getenv("TEST_TMPDIR"), "/", name);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Polls for a file written by a worker script (there is no event for it).
bool WaitForFile(const std::string& path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  struct stat st;
  while (stat(path.c_str(), &st) != 0 || st.st_size == 0) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

bool PollFor(const std::function<bool()>& done, absl::Duration timeout = kPrompt) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// A process is gone when /proc has no entry for it or it is a zombie.
bool ProcessGone(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

bool WaitGone(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!ProcessGone(pid)) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// Zombie children of this test process, from /proc/*/stat.
int ZombieChildren() {
  const std::vector<ProcessEntry> processes = ScanProcesses();
  return static_cast<int>(
      std::count_if(processes.begin(), processes.end(), [](const ProcessEntry& p) {
        return p.activity.ppid == getpid() && p.activity.state == 'Z';
      }));
}

// Collects callback events.
class Events {
 public:
  WorkerSupervisor::ExitCallback Callback() {
    return [this](const WorkerExit& e) {
      absl::MutexLock lock(&mu_);
      events_.push_back(e);
    };
  }
  // Waits for `n` events; returns them (fewer on timeout).
  std::vector<WorkerExit> Await(size_t n, absl::Duration timeout = kPrompt) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return events_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
    return events_;
  }
  const WorkerExit* ForRank(int local_rank) {
    absl::MutexLock lock(&mu_);
    for (const WorkerExit& e : events_) {
      if (e.local_rank == local_rank) return &e;
    }
    return nullptr;
  }

 private:
  absl::Mutex mu_;
  std::vector<WorkerExit> events_ ABSL_GUARDED_BY(mu_);
};

WorkerSpec Script(const std::string& run_dir, int local_rank, const std::string& script,
                  int global_offset = 0) {
  WorkerSpec spec;
  spec.local_rank = local_rank;
  spec.global_rank = global_offset + local_rank;
  spec.argv = {"/bin/sh", "-c", script};
  spec.files = WorkerFilesFor(run_dir, 0, local_rank);
  spec.env = CurrentEnvironment();
  spec.env["TORCHELASTIC_ERROR_FILE"] = spec.files.error_file;
  spec.env["DDP_HEARTBEAT_FILE"] = spec.files.heartbeat_file;
  spec.console_prefix = absl::StrCat("[default", local_rank, "]:");
  return spec;
}

WorkerSupervisor::Options QuietOptions(int console_fd) {
  WorkerSupervisor::Options o;
  o.console_out_fd = console_fd;
  o.console_err_fd = console_fd;
  o.heartbeat_timeout = absl::ZeroDuration();
  o.kill_grace = absl::Seconds(5);
  return o;
}

// Hang detection on: a worker silent for 300 ms is hung, checked every 20 ms.
WorkerSupervisor::Options FastHangOptions(int console_fd) {
  WorkerSupervisor::Options o = QuietOptions(console_fd);
  o.heartbeat_timeout = absl::Milliseconds(300);
  o.check_interval = absl::Milliseconds(20);
  return o;
}

class WorkerSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    console_path_ = TestDir(
        absl::StrCat(::testing::UnitTest::GetInstance()->current_test_info()->name(), ".console"));
    console_fd_ = open(console_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    ASSERT_GE(console_fd_, 0);
    run_dir_ = TestDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { close(console_fd_); }
  std::string Console() { return ReadFile(console_path_); }

  // One worker that writes "term" to `marker` and exits 0 on SIGTERM or
  // SIGINT; returns once its trap is set.
  void StartTrappingWorker(WorkerSupervisor& supervisor, const std::string& marker) {
    const std::string ready = run_dir_ + "/ready";
    ASSERT_TRUE(supervisor
                    .Start({Script(run_dir_, 0,
                                   "trap 'echo term > " + marker + "; exit 0' TERM INT; echo x > " +
                                       ready + "; while true; do sleep 0.05; done")})
                    .ok());
    ASSERT_TRUE(WaitForFile(ready, kPrompt));
  }

  std::string console_path_;
  std::string run_dir_;
  int console_fd_ = -1;
};

TEST_F(WorkerSupervisorTest, Start_ExitCodesAndSignals_ReportedPromptly) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0, "exit 0"), Script(run_dir_, 1, "exit 3"),
                          Script(run_dir_, 2, "kill -SEGV $$")})
                  .ok());
  ASSERT_EQ(events.Await(3).size(), 3u);
  EXPECT_LT(absl::Now() - start, kPrompt);
  EXPECT_TRUE(events.ForRank(0)->succeeded());
  EXPECT_EQ(events.ForRank(1)->kind, WorkerExit::Kind::kExited);
  EXPECT_EQ(events.ForRank(1)->exit_code, 3);
  EXPECT_EQ(events.ForRank(1)->Describe(), "exit code 3");
  EXPECT_EQ(events.ForRank(2)->kind, WorkerExit::Kind::kSignaled);
  EXPECT_EQ(events.ForRank(2)->signal, SIGSEGV);
  EXPECT_FALSE(events.ForRank(2)->during_stop);
  EXPECT_TRUE(supervisor.AwaitAllExited(absl::Seconds(1)));
  for (const WorkerState& state : supervisor.Workers()) {
    EXPECT_FALSE(state.running);
    EXPECT_GT(state.pid, 0);
    ASSERT_TRUE(state.exit.has_value());
  }
  EXPECT_EQ(ZombieChildren(), 0);
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(1)).ok());
}

// Ctrl-C forwarded: the workers get SIGINT first, so their KeyboardInterrupt
// handlers (here a shell trap) run.
TEST_F(WorkerSupervisorTest, Stop_FirstSignalSigint_WorkersSeeSigint) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  const std::string marker = run_dir_ + "/got-int";
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0,
                                 "trap 'echo int > " + marker +
                                     "; exit 0' INT; while true; do sleep 0.05; done")})
                  .ok());
  absl::SleepFor(absl::Milliseconds(300));  // the trap is set
  ASSERT_TRUE(supervisor.Stop(absl::Seconds(4), SIGINT).ok());
  EXPECT_EQ(ReadFile(marker), "int\n");
}

TEST_F(WorkerSupervisorTest, Stop_WorkerIgnoresSigterm_EscalatesToSigkill) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  const std::string ready = run_dir_ + "/ready";
  ASSERT_TRUE(
      supervisor
          .Start({Script(run_dir_, 0,
                         "trap '' TERM; echo x > " + ready + "; while true; do sleep 0.05; done")})
          .ok());
  ASSERT_TRUE(WaitForFile(ready, kPrompt));
  const absl::Time start = absl::Now();
  EXPECT_TRUE(supervisor.Stop(absl::Milliseconds(300)).ok());
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, kPrompt);
  ASSERT_EQ(events.Await(1).size(), 1u);
  EXPECT_EQ(events.ForRank(0)->kind, WorkerExit::Kind::kSignaled);
  EXPECT_EQ(events.ForRank(0)->signal, SIGKILL);
  EXPECT_TRUE(events.ForRank(0)->during_stop);
  EXPECT_EQ(ZombieChildren(), 0);
}

TEST_F(WorkerSupervisorTest, Stop_Grandchild_KilledWithTheGroup) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  const std::string pid_file = run_dir_ + "/grandchild.pid";
  ASSERT_TRUE(
      supervisor.Start({Script(run_dir_, 0, "sleep 1000 & echo $! > " + pid_file + "; wait")})
          .ok());
  ASSERT_TRUE(WaitForFile(pid_file, kPrompt));
  const pid_t grandchild = std::stoi(ReadFile(pid_file));
  ASSERT_FALSE(ProcessGone(grandchild));
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
  EXPECT_TRUE(WaitGone(grandchild, kPrompt));
  EXPECT_EQ(events.ForRank(0)->signal, SIGTERM);
}

// The state letter of /proc/PID/stat ('T' stopped, 'S' sleeping, ...).
char ProcessState(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!stat || !std::getline(stat, line)) return '?';
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : '?';
}

bool WaitForState(pid_t pid, char state, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (ProcessState(pid) != state) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// Whether every process in group `pgid` is stopped. A shell frozen while it
// forks a command is the one exception: dash forks with vfork, and a vfork
// parent whose child was stopped before its exec waits in the kernel ('D')
// until the child goes on, so it is stopped too (it runs no instruction).
bool GroupStopped(pid_t pgid) {
  std::vector<ProcessEntry> group;
  for (const ProcessEntry& p : ScanProcesses()) {
    if (p.activity.pgrp == pgid) group.push_back(p);
  }
  auto has_stopped_child = [&](pid_t pid) {
    return std::any_of(group.begin(), group.end(), [&](const ProcessEntry& p) {
      return p.activity.ppid == pid && p.activity.state == 'T';
    });
  };
  return !group.empty() && std::all_of(group.begin(), group.end(), [&](const ProcessEntry& p) {
    return p.activity.state == 'T' || (p.activity.state == 'D' && has_stopped_child(p.pid));
  });
}

bool WaitForGroupStopped(pid_t pgid, absl::Duration timeout) {
  return PollFor([&] { return GroupStopped(pgid); }, timeout);
}

// A frozen worker and its child run no instruction: a counter file stops
// growing; thawed, it grows again, and no exit was reported.
TEST_F(WorkerSupervisorTest, FreezeThaw_GroupStopsAndResumes) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  const std::string ticks = run_dir_ + "/ticks";
  const std::string child_pid = run_dir_ + "/child.pid";
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0,
                                 "sleep 1000 & echo $! > " + child_pid +
                                     "; while true; do echo x >> " + ticks + "; sleep 0.02; done")})
                  .ok());
  ASSERT_TRUE(WaitForFile(child_pid, kPrompt));
  ASSERT_TRUE(WaitForFile(ticks, kPrompt));
  const pid_t worker = supervisor.Workers()[0].pid;
  const pid_t child = std::stoi(ReadFile(child_pid));
  supervisor.Freeze();
  EXPECT_TRUE(supervisor.frozen());
  ASSERT_TRUE(WaitForGroupStopped(worker, kPrompt));
  ASSERT_TRUE(WaitForState(child, 'T', kPrompt));
  const size_t frozen_size = ReadFile(ticks).size();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(ReadFile(ticks).size(), frozen_size);
  supervisor.Thaw();
  EXPECT_FALSE(supervisor.frozen());
  ASSERT_TRUE(PollFor([&] { return ReadFile(ticks).size() > frozen_size; }));
  EXPECT_NE(ProcessState(child), 'T');
  EXPECT_TRUE(events.Await(1, absl::Milliseconds(100)).empty());
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
}

// A worker stopped by someone else (not the lease's freeze) is let go on
// after the SIGTERM, as systemd does: it handles the signal at once instead
// of holding the stop up to its timeout.
TEST_F(WorkerSupervisorTest, Stop_WorkerStoppedBySomeoneElse_HandlesSigtermPromptly) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  const std::string marker = run_dir_ + "/got-term";
  ASSERT_NO_FATAL_FAILURE(StartTrappingWorker(supervisor, marker));
  const pid_t pid = supervisor.Workers()[0].pid;
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  ASSERT_TRUE(WaitForState(pid, 'T', kPrompt));
  const absl::Time start = absl::Now();
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(20)).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(ReadFile(marker), "term\n");
}

// A stop of frozen workers never lets them run again: not even a SIGTERM
// handler (which could write a checkpoint of a superseded generation).
TEST_F(WorkerSupervisorTest, Stop_Frozen_KilledWithoutRunningTheirHandlers) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  const std::string marker = run_dir_ + "/handler-ran";
  ASSERT_NO_FATAL_FAILURE(StartTrappingWorker(supervisor, marker));
  supervisor.Freeze();
  ASSERT_TRUE(WaitForGroupStopped(supervisor.Workers()[0].pid, kPrompt));
  const absl::Time start = absl::Now();
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(10), SIGINT).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // no SIGINT/SIGTERM wait
  ASSERT_EQ(events.Await(1).size(), 1u);
  EXPECT_EQ(events.ForRank(0)->signal, SIGKILL);
  EXPECT_TRUE(events.ForRank(0)->during_stop);
  struct stat st;
  EXPECT_NE(stat(marker.c_str(), &st), 0) << "a frozen worker ran its handler";
  EXPECT_EQ(ZombieChildren(), 0);
}

// Hang detection is paused while frozen, and the frozen time is not silence:
// a worker frozen for three hang timeouts is not reported when thawed.
TEST_F(WorkerSupervisorTest, Hang_FrozenLongerThanTheTimeout_NotAHang) {
  Events events;
  WorkerSupervisor::Options options = QuietOptions(console_fd_);
  options.heartbeat_timeout = absl::Milliseconds(400);
  options.check_interval = absl::Milliseconds(50);
  WorkerSupervisor supervisor(options, RealClock::Get(), events.Callback());
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0,
                                 "while true; do touch \"$DDP_HEARTBEAT_FILE\"; sleep 0.05; "
                                 "done")})
                  .ok());
  absl::SleepFor(absl::Milliseconds(300));  // touched a few times
  supervisor.Freeze();
  absl::SleepFor(absl::Milliseconds(1200));
  supervisor.Thaw();
  EXPECT_TRUE(events.Await(1, absl::Milliseconds(600)).empty());
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
}

// Without -r/-t the console gets the workers' bytes as they are: no prefix,
// partial lines and carriage returns (tqdm) kept, a 300 KB line in one piece.
TEST_F(WorkerSupervisorTest, Output_NoTeeNoRedirect_ByteForByte) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  WorkerSpec spec =
      Script(run_dir_, 0,
             "printf '10%%\\r50%%\\r100%%'; head -c 300000 /dev/zero | tr '\\0' x; printf '\\n'");
  spec.show_on_console = false;  // a filter applies to teed output only
  ASSERT_TRUE(supervisor.Start({spec}).ok());
  ASSERT_TRUE(supervisor.AwaitAllExited(kPrompt));
  ASSERT_TRUE(supervisor.Stop(absl::Seconds(1)).ok());
  EXPECT_EQ(Console(), "10%\r50%\r100%" + std::string(300000, 'x') + "\n");
}

TEST_F(WorkerSupervisorTest, Output_TeeAndRedirect_TeeWins) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  WorkerSpec spec = Script(run_dir_, 1, "echo both");
  spec.redirect = Std::kAll;
  spec.tee = Std::kAll;
  ASSERT_TRUE(supervisor.Start({spec}).ok());
  ASSERT_TRUE(supervisor.AwaitAllExited(kPrompt));
  ASSERT_TRUE(supervisor.Stop(absl::Seconds(1)).ok());
  EXPECT_NE(Console().find("[default1]:both\n"), std::string::npos) << Console();
  EXPECT_EQ(ReadFile(spec.files.stdout_log), "both\n");
}

TEST_F(WorkerSupervisorTest, Output_RedirectTeeAndFilter_AsTorchrun) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  WorkerSpec teed = Script(run_dir_, 0, "echo out0; echo err0 >&2", /*global_offset=*/4);
  teed.tee = Std::kAll;
  WorkerSpec redirected = Script(run_dir_, 1, "echo out1; echo err1 >&2", 4);
  redirected.redirect = Std::kOut;
  WorkerSpec filtered = Script(run_dir_, 2, "echo out2", 4);
  filtered.show_on_console = false;
  filtered.tee = Std::kOut;
  ASSERT_TRUE(supervisor.Start({teed, redirected, filtered}).ok());
  ASSERT_TRUE(supervisor.AwaitAllExited(kPrompt));
  ASSERT_TRUE(supervisor.Stop(absl::Seconds(1)).ok());  // drains the pipes

  const std::string console = Console();
  EXPECT_NE(console.find("[default0]:out0\n"), std::string::npos) << console;  // teed
  EXPECT_NE(console.find("[default0]:err0\n"), std::string::npos) << console;
  EXPECT_EQ(console.find("out1"), std::string::npos) << console;  // redirected
  // Neither teed nor redirected: straight from the worker, unprefixed.
  EXPECT_NE(console.find("err1\n"), std::string::npos) << console;
  EXPECT_EQ(console.find("]:err1"), std::string::npos) << console;
  EXPECT_EQ(console.find("out2"), std::string::npos) << console;  // filtered tee
  EXPECT_EQ(ReadFile(teed.files.stdout_log), "out0\n");
  EXPECT_EQ(ReadFile(teed.files.stderr_log), "err0\n");
  EXPECT_EQ(ReadFile(redirected.files.stdout_log), "out1\n");
  // stderr not redirected: captured (for its tail) into stderr.log as well.
  EXPECT_EQ(ReadFile(redirected.files.stderr_log), "err1\n");
  EXPECT_EQ(ReadFile(filtered.files.stdout_log),
            "out2\n");  // files ignore the filter
}

TEST_F(WorkerSupervisorTest, Exit_ErrorFileWritten_MessageReported) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  const std::string script =
      R"(printf '{"message": {"message": "RuntimeError: boom", "extraInfo": )"
      R"({"py_callstack": "Traceback", "timestamp": "1"}}}' > "$TORCHELASTIC_ERROR_FILE"; exit 1)";
  ASSERT_TRUE(supervisor.Start({Script(run_dir_, 0, script)}).ok());
  ASSERT_EQ(events.Await(1).size(), 1u);
  const WorkerExit* exit = events.ForRank(0);
  EXPECT_EQ(exit->exit_code, 1);
  ASSERT_TRUE(exit->error.has_value());
  EXPECT_EQ(exit->error->message, "RuntimeError: boom");
  EXPECT_EQ(exit->error->traceback, "Traceback");
  EXPECT_EQ(exit->error_file, run_dir_ + "/attempt_0/0/error.json");
}

TEST_F(WorkerSupervisorTest, Exit_TracebackOnStderr_ReportCarriesTailTracebackAndLogRedacted) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  WorkerSpec spec = Script(run_dir_, 0,
                           "echo \"connecting with $DDP_TOKEN\" >&2; "
                           "printf 'Traceback (most recent call last):\\n  File \"train.py\", "
                           "line 7, in <module>\\nValueError: bad batch\\n' >&2; exit 1");
  spec.env["DDP_TOKEN"] = "s3cr3t-token-value";
  ASSERT_TRUE(supervisor.Start({spec}).ok());
  ASSERT_EQ(events.Await(1).size(), 1u);
  const WorkerExit* exit = events.ForRank(0);
  EXPECT_EQ(exit->exit_code, 1);
  EXPECT_NE(exit->stderr_tail.find("ValueError: bad batch"), std::string::npos)
      << exit->stderr_tail;
  EXPECT_NE(exit->stderr_tail.find("connecting with [REDACTED]"), std::string::npos)
      << exit->stderr_tail;
  EXPECT_EQ(exit->stderr_tail.find("s3cr3t-token-value"), std::string::npos);
  EXPECT_EQ(exit->stderr_traceback,
            "Traceback (most recent call last):\n  File \"train.py\", line 7, in "
            "<module>\nValueError: bad batch");
  EXPECT_EQ(exit->stderr_log, run_dir_ + "/attempt_0/0/stderr.log");
  // The console still gets the bytes as written (secrets are the worker's own
  // business there), and so does the log.
  ASSERT_TRUE(supervisor.Stop(absl::Seconds(1)).ok());
  EXPECT_NE(Console().find("ValueError: bad batch\n"), std::string::npos) << Console();
  EXPECT_NE(ReadFile(exit->stderr_log).find("Traceback (most recent call last):"),
            std::string::npos);
}

TEST_F(WorkerSupervisorTest, Exit_ProgramMissing_Exit127WithReason) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  WorkerSpec spec = Script(run_dir_, 0, "");
  spec.argv = {"/no/such/trainer"};
  ASSERT_TRUE(supervisor.Start({spec}).ok());
  ASSERT_EQ(events.Await(1).size(), 1u);
  EXPECT_EQ(events.ForRank(0)->exit_code, 127);
  ASSERT_TRUE(events.ForRank(0)->error.has_value());
  EXPECT_NE(events.ForRank(0)->error->message.find("cannot execute '/no/such/trainer'"),
            std::string::npos);
}

TEST_F(WorkerSupervisorTest, Hang_HeartbeatTouchedOnceThenSilent_ReportedAsHang) {
  Events events;
  WorkerSupervisor::Options options = QuietOptions(console_fd_);
  options.heartbeat_timeout = absl::Milliseconds(300);
  options.check_interval = absl::Milliseconds(50);
  WorkerSupervisor supervisor(options, RealClock::Get(), events.Callback());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0, "touch \"$DDP_HEARTBEAT_FILE\"; sleep 1000"),
                          Script(run_dir_, 1, "sleep 1000")})  // never touches: not judged
                  .ok());
  ASSERT_EQ(events.Await(1).size(), 1u);
  const WorkerExit* hang = events.ForRank(0);
  ASSERT_NE(hang, nullptr);
  EXPECT_EQ(hang->kind, WorkerExit::Kind::kHung);
  EXPECT_GT(hang->silent_for, absl::Milliseconds(300));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_EQ(events.ForRank(1), nullptr);
  std::vector<WorkerState> states = supervisor.Workers();
  EXPECT_TRUE(states[0].hung && states[0].running);
  EXPECT_FALSE(states[1].hung);
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
  EXPECT_EQ(events.Await(3).size(),
            3u);  // the hang, then both exits from the stop
}

// A node of a multi-node generation: an idle worker (judged: it used more
// than 1 s of CPU, then sleeps) is published as idle, and no hang is
// declared, however long: the coordinator judges job-wide.
TEST_F(WorkerSupervisorTest, Idle_NotTheWholeJob_PublishedNotDeclared) {
  Events events;
  WorkerSupervisor::Options options = QuietOptions(console_fd_);
  options.check_interval = absl::Milliseconds(50);
  options.hang_timeout = absl::Seconds(2);
  options.declare_idle_hangs = false;
  WorkerSupervisor supervisor(options, RealClock::Get(), events.Callback());
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0,
                                 "python3 -c 'import time\nt = time.process_time()\n"
                                 "while time.process_time() - t < 1.5: pass' && exec sleep 1000")})
                  .ok());
  ASSERT_TRUE(
      PollFor([&] { return supervisor.Workers()[0].idle_since.has_value(); }, absl::Seconds(30)));
  const absl::Time idle_since = *supervisor.Workers()[0].idle_since;
  EXPECT_GT(absl::Now() - idle_since, options.idle_report_after);
  absl::SleepFor(absl::Seconds(3));  // past hang_timeout
  EXPECT_EQ(events.Await(1, absl::ZeroDuration()).size(), 0u);
  EXPECT_EQ(supervisor.Workers()[0].idle_since, idle_since);  // the same idle stretch
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
}

// Worker 1 goes silent first; worker 0 (its peer, blocked behind it) a
// moment later. A check interval longer than both silences puts them in one
// check: the older heartbeat is the hang, the other a knock-on of it.
TEST_F(WorkerSupervisorTest, Hang_TwoSilentInOneCheck_OldestHeartbeatBlamed) {
  Events events;
  WorkerSupervisor::Options options = QuietOptions(console_fd_);
  options.heartbeat_timeout = absl::Milliseconds(300);
  options.check_interval = absl::Seconds(1);
  WorkerSupervisor supervisor(options, RealClock::Get(), events.Callback());
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0,
                                 "sleep 0.4; touch \"$DDP_HEARTBEAT_FILE\"; "
                                 "sleep 1000",
                                 /*global_offset=*/4),
                          Script(run_dir_, 1, "touch \"$DDP_HEARTBEAT_FILE\"; sleep 1000",
                                 /*global_offset=*/4)})
                  .ok());
  const std::vector<WorkerExit> hangs = events.Await(2, absl::Seconds(10));
  ASSERT_EQ(hangs.size(), 2u);
  EXPECT_EQ(hangs[0].kind, WorkerExit::Kind::kHung);
  EXPECT_EQ(hangs[0].local_rank, 1);  // reported first, and on its own
  EXPECT_FALSE(hangs[0].knock_on());
  EXPECT_EQ(hangs[1].local_rank, 0);
  EXPECT_EQ(hangs[1].knock_on_of_rank, 5);
  EXPECT_EQ(hangs[0].time, hangs[1].time);  // one check
  EXPECT_LE(hangs[0].last_heartbeat, hangs[1].last_heartbeat);
  EXPECT_GT(hangs[0].pid, 0);
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
}

// Worker 1 is SIGSTOPped right after its heartbeat; worker 0, its peer, had
// touched its file earlier and then blocks. By heartbeat time alone worker 0
// would be blamed; the stopped process state says it is worker 1.
TEST_F(WorkerSupervisorTest, Hang_StoppedWorker_BlamedOverOlderHeartbeat) {
  Events events;
  WorkerSupervisor::Options options = QuietOptions(console_fd_);
  options.heartbeat_timeout = absl::Milliseconds(300);
  options.check_interval = absl::Seconds(1);
  WorkerSupervisor supervisor(options, RealClock::Get(), events.Callback());
  ASSERT_TRUE(
      supervisor
          .Start({Script(run_dir_, 0, "touch \"$DDP_HEARTBEAT_FILE\"; sleep 1000",
                         /*global_offset=*/4),
                  Script(run_dir_, 1, "sleep 0.2; touch \"$DDP_HEARTBEAT_FILE\"; sleep 1000",
                         /*global_offset=*/4)})
          .ok());
  absl::SleepFor(absl::Milliseconds(500));
  const pid_t stopped = supervisor.Workers()[1].pid;
  ASSERT_GT(stopped, 0);
  ASSERT_EQ(kill(stopped, SIGSTOP), 0);
  const std::vector<WorkerExit> hangs = events.Await(2, absl::Seconds(10));
  ASSERT_EQ(hangs.size(), 2u);
  EXPECT_EQ(hangs[0].local_rank, 1);  // the stopped one, on its own
  EXPECT_FALSE(hangs[0].knock_on());
  EXPECT_TRUE(hangs[0].process_stopped);
  EXPECT_NE(hangs[0].Describe().find("process stopped (state T"), std::string::npos)
      << hangs[0].Describe();
  EXPECT_EQ(hangs[1].local_rank, 0);
  EXPECT_EQ(hangs[1].knock_on_of_rank, 5);
  // Seen in one check: by heartbeat alone the older file (worker 0) is blamed.
  EXPECT_EQ(hangs[0].last_heartbeat, hangs[1].last_heartbeat);
  kill(stopped, SIGCONT);
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
}

TEST_F(WorkerSupervisorTest, Hang_SecondHangInLaterCheck_KnockOnOfFirst) {
  Events events;
  WorkerSupervisor::Options options = FastHangOptions(console_fd_);
  WorkerSupervisor supervisor(options, RealClock::Get(), events.Callback());
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0, "touch \"$DDP_HEARTBEAT_FILE\"; sleep 1000"),
                          Script(run_dir_, 1,
                                 "for i in 1 2 3 4 5 6; do touch \"$DDP_HEARTBEAT_FILE\"; "
                                 "sleep 0.15; done; sleep 1000")})
                  .ok());
  const std::vector<WorkerExit> hangs = events.Await(2, absl::Seconds(10));
  ASSERT_EQ(hangs.size(), 2u);
  EXPECT_EQ(hangs[0].local_rank, 0);
  EXPECT_FALSE(hangs[0].knock_on());
  EXPECT_EQ(hangs[1].local_rank, 1);
  EXPECT_EQ(hangs[1].knock_on_of_rank, 0);
  EXPECT_LT(hangs[0].time, hangs[1].time);
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
}

// Worker 0 blocks (its heartbeat stops) a moment before worker 1 is stopped
// (SIGSTOP): worker 0's hang is found first, but the stopped one found in a
// later check is a hang of its own, not a knock-on of the blocked one.
TEST_F(WorkerSupervisorTest, Hang_StoppedProcessInALaterCheck_NotAKnockOn) {
  Events events;
  WorkerSupervisor::Options options = FastHangOptions(console_fd_);
  WorkerSupervisor supervisor(options, RealClock::Get(), events.Callback());
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0, "touch \"$DDP_HEARTBEAT_FILE\"; sleep 1000"),
                          Script(run_dir_, 1,
                                 "while true; do touch \"$DDP_HEARTBEAT_FILE\"; sleep 0.02; "
                                 "done")})
                  .ok());
  absl::SleepFor(absl::Milliseconds(150));
  const pid_t stopped = supervisor.Workers()[1].pid;
  ASSERT_EQ(kill(stopped, SIGSTOP), 0);
  const std::vector<WorkerExit> hangs = events.Await(2, absl::Seconds(10));
  ASSERT_EQ(hangs.size(), 2u);
  EXPECT_EQ(hangs[0].local_rank, 0);
  EXPECT_FALSE(hangs[0].process_stopped);
  EXPECT_EQ(hangs[1].local_rank, 1);
  EXPECT_TRUE(hangs[1].process_stopped);
  EXPECT_FALSE(hangs[1].knock_on()) << hangs[1].knock_on_of_rank;
  kill(stopped, SIGCONT);
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
}

// StoppedWorkers: a worker stopped by someone else, not yet found hung, is
// returned as a hang of a stopped process; none while frozen by Freeze.
TEST_F(WorkerSupervisorTest, StoppedWorkers_StoppedBySomeoneElse_ReturnedAsStoppedHang) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0, "while true; do sleep 0.02; done"),
                          Script(run_dir_, 1, "while true; do sleep 0.02; done")})
                  .ok());
  EXPECT_TRUE(supervisor.StoppedWorkers().empty());
  const pid_t stopped = supervisor.Workers()[1].pid;
  ASSERT_EQ(kill(stopped, SIGSTOP), 0);
  ASSERT_TRUE(WaitForState(stopped, 'T', kPrompt));
  std::vector<WorkerExit> found = supervisor.StoppedWorkers();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].local_rank, 1);
  EXPECT_EQ(found[0].pid, stopped);
  EXPECT_EQ(found[0].kind, WorkerExit::Kind::kHung);
  EXPECT_TRUE(found[0].process_stopped);
  EXPECT_NE(found[0].Describe().find("process stopped (state T"), std::string::npos)
      << found[0].Describe();
  supervisor.Freeze();
  EXPECT_TRUE(supervisor.StoppedWorkers().empty());
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
}

TEST_F(WorkerSupervisorTest, Stop_FromCallback_FailedPrecondition) {
  absl::Notification done;
  absl::Status from_callback;
  WorkerSupervisor* self = nullptr;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), [&](const WorkerExit&) {
    from_callback = self->Stop(absl::Seconds(1));
    done.Notify();
  });
  self = &supervisor;
  ASSERT_TRUE(supervisor.Start({Script(run_dir_, 0, "exit 0")}).ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kPrompt));
  EXPECT_EQ(from_callback.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(1)).ok());
}

TEST_F(WorkerSupervisorTest, Start_Twice_FailedPrecondition) {
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), nullptr);
  ASSERT_TRUE(supervisor.Start({Script(run_dir_, 0, "exit 0")}).ok());
  EXPECT_EQ(supervisor.Start({Script(run_dir_, 0, "exit 0")}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(WorkerSupervisor(QuietOptions(console_fd_), RealClock::Get(), nullptr).Start({}).code(),
            absl::StatusCode::kInvalidArgument);
}

// The agent is SIGKILLed: PR_SET_PDEATHSIG takes its workers with it.
TEST_F(WorkerSupervisorTest, AgentKilled_WorkerDies) {
  const std::string pid_file = run_dir_ + "/worker.pid";
  ASSERT_TRUE(MakeDirectories(run_dir_).ok());
  const pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {  // the mini-agent
    WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), nullptr);
    if (!supervisor.Start({Script(run_dir_, 0, "echo $$ > " + pid_file + "; exec sleep 1000")})
             .ok()) {
      _exit(2);
    }
    pause();
    _exit(0);
  }
  ASSERT_TRUE(WaitForFile(pid_file, kPrompt));
  const pid_t worker = std::stoi(ReadFile(pid_file));
  ASSERT_FALSE(ProcessGone(worker));
  ASSERT_EQ(kill(agent, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(agent, &status, 0), agent);
  EXPECT_TRUE(WaitGone(worker, kPrompt)) << "worker " << worker << " outlived its agent";
}

}  // namespace
}  // namespace ddp::client

namespace ddp::client {
namespace {

// --in-process-restart: one slot stopped and started again, the other runs on.
TEST_F(WorkerSupervisorTest, StopRanksThenReplace_OtherWorkerRunsOn_NewWorkerInSlot) {
  Events events;
  WorkerSupervisor supervisor(QuietOptions(console_fd_), RealClock::Get(), events.Callback());
  const std::string loop = "while true; do sleep 0.05; done";
  ASSERT_TRUE(supervisor.Start({Script(run_dir_, 0, loop), Script(run_dir_, 1, loop)}).ok());
  const pid_t survivor = supervisor.Workers()[0].pid;
  const pid_t failed = supervisor.Workers()[1].pid;

  ASSERT_TRUE(supervisor.StopRanks({1}, absl::Seconds(5)).ok());
  ASSERT_EQ(events.Await(1).size(), 1u);
  EXPECT_TRUE(events.ForRank(1)->during_stop);  // the agent's doing, not a failure
  EXPECT_TRUE(WaitGone(failed, kPrompt));
  EXPECT_FALSE(ProcessGone(survivor));
  EXPECT_TRUE(supervisor.Workers()[0].running);

  // The running one cannot be replaced; the stopped one can.
  EXPECT_TRUE(absl::IsFailedPrecondition(supervisor.Replace(Script(run_dir_, 0, "exit 0"))));
  const std::string marker = run_dir_ + "/replaced";
  WorkerSpec next = Script(run_dir_, 1, "echo x > " + marker + "; exit 4", /*global_offset=*/2);
  next.files = WorkerFilesFor(run_dir_, 2, 1);  // attempt_1
  ASSERT_TRUE(supervisor.Replace(next).ok());
  ASSERT_TRUE(WaitForFile(marker, kPrompt));
  // Its exit is reported as a failure of its own (not during a stop).
  ASSERT_EQ(events.Await(2).size(), 2u);
  const WorkerExit exit = events.Await(2)[1];
  EXPECT_EQ(exit.local_rank, 1);
  EXPECT_EQ(exit.global_rank, 3);
  EXPECT_EQ(exit.exit_code, 4);
  EXPECT_FALSE(exit.during_stop);
  EXPECT_EQ(supervisor.Workers()[0].pid, survivor);

  ASSERT_TRUE(supervisor.Stop(absl::Seconds(5)).ok());
  EXPECT_TRUE(WaitGone(survivor, kPrompt));
  EXPECT_EQ(ZombieChildren(), 0);
}

// A terminal for an interactive run's options: a pty that is not this
// process's controlling terminal, so the workers' tcsetpgrp fails and only
// the group sharing is seen.
class InteractiveSupervisorTest : public WorkerSupervisorTest {
 protected:
  void SetUp() override {
    WorkerSupervisorTest::SetUp();
    pty_master_ = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    ASSERT_GE(pty_master_, 0);
    ASSERT_EQ(grantpt(pty_master_), 0);
    ASSERT_EQ(unlockpt(pty_master_), 0);
    terminal_ = open(ptsname(pty_master_), O_RDWR | O_NOCTTY | O_CLOEXEC);
    ASSERT_GE(terminal_, 0);
  }
  void TearDown() override {
    close(terminal_);
    close(pty_master_);
    WorkerSupervisorTest::TearDown();
  }
  WorkerSupervisor::Options Interactive() {
    WorkerSupervisor::Options o = QuietOptions(console_fd_);
    o.terminal_fd = terminal_;
    return o;
  }

  int pty_master_ = -1;
  int terminal_ = -1;
};

// As under torchrun: one group for every worker, frozen, thawed and stopped
// as one (a worker's child too).
TEST_F(InteractiveSupervisorTest, Start_WorkersShareTheFirstOnesGroup_StoppedTogether) {
  Events events;
  WorkerSupervisor supervisor(Interactive(), RealClock::Get(), events.Callback());
  const std::string pid_file = run_dir_ + "/grandchild.pid";
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0, "while true; do sleep 0.05; done"),
                          Script(run_dir_, 1, "sleep 1000 & echo $! > " + pid_file + "; wait")})
                  .ok());
  ASSERT_TRUE(WaitForFile(pid_file, kPrompt));
  const pid_t first = supervisor.Workers()[0].pid;
  const pid_t second = supervisor.Workers()[1].pid;
  const pid_t grandchild = std::stoi(ReadFile(pid_file));
  EXPECT_EQ(getpgid(first), first);
  EXPECT_EQ(getpgid(second), first);
  EXPECT_EQ(getpgid(grandchild), first);

  supervisor.Freeze();
  EXPECT_TRUE(WaitForGroupStopped(first, kPrompt));
  supervisor.Thaw();
  EXPECT_TRUE(PollFor([&] { return ProcessState(second) != 'T'; }));

  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
  ASSERT_EQ(events.Await(2).size(), 2u);
  EXPECT_EQ(events.ForRank(0)->signal, SIGTERM);
  EXPECT_EQ(events.ForRank(1)->signal, SIGTERM);
  EXPECT_TRUE(WaitGone(grandchild, kPrompt));
  EXPECT_EQ(ZombieChildren(), 0);
}

// In-process restart in a shared group: stopping one worker ends it and its
// child only; its replacement joins the group that is still there.
TEST_F(InteractiveSupervisorTest, StopRanks_OneWorkerOfTheSharedGroup_OthersRunOn) {
  Events events;
  WorkerSupervisor supervisor(Interactive(), RealClock::Get(), events.Callback());
  const std::string pid_file = run_dir_ + "/child.pid";
  const std::string loop = "while true; do sleep 0.05; done";
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0, loop),
                          Script(run_dir_, 1, "sleep 1000 & echo $! > " + pid_file + "; wait")})
                  .ok());
  ASSERT_TRUE(WaitForFile(pid_file, kPrompt));
  const pid_t survivor = supervisor.Workers()[0].pid;
  const pid_t child = std::stoi(ReadFile(pid_file));

  ASSERT_TRUE(supervisor.StopRanks({1}, absl::Seconds(5)).ok());
  ASSERT_EQ(events.Await(1).size(), 1u);
  EXPECT_EQ(events.ForRank(1)->signal, SIGTERM);
  EXPECT_TRUE(WaitGone(child, kPrompt));
  EXPECT_FALSE(ProcessGone(survivor));
  EXPECT_TRUE(supervisor.Workers()[0].running);

  const std::string marker = run_dir_ + "/replaced";
  WorkerSpec next = Script(run_dir_, 1, "echo x > " + marker + "; " + loop);
  next.files = WorkerFilesFor(run_dir_, 2, 1);
  ASSERT_TRUE(supervisor.Replace(next).ok());
  ASSERT_TRUE(WaitForFile(marker, kPrompt));
  EXPECT_EQ(getpgid(supervisor.Workers()[1].pid), survivor);

  ASSERT_TRUE(supervisor.Stop(absl::Seconds(5)).ok());
  EXPECT_TRUE(WaitGone(survivor, kPrompt));
  EXPECT_EQ(ZombieChildren(), 0);
}

// Each worker of a shared group is judged on its own processes: worker 1,
// idle after a second of CPU, is published idle while worker 0 (same group)
// keeps writing.
TEST_F(InteractiveSupervisorTest, Idle_SharedGroup_EachWorkerSampledOnItsOwn) {
  Events events;
  WorkerSupervisor::Options options = Interactive();
  options.check_interval = absl::Milliseconds(50);
  options.hang_timeout = absl::Seconds(30);
  options.declare_idle_hangs = false;
  WorkerSupervisor supervisor(options, RealClock::Get(), events.Callback());
  ASSERT_TRUE(
      supervisor
          .Start({Script(run_dir_, 0,
                         "while true; do echo busy >> " + run_dir_ + "/out; sleep 0.1; done"),
                  Script(run_dir_, 1,
                         "python3 -c 'import time\nt = time.process_time()\n"
                         "while time.process_time() - t < 1.5: pass' && exec sleep 1000")})
          .ok());
  ASSERT_EQ(getpgid(supervisor.Workers()[1].pid), supervisor.Workers()[0].pid);
  EXPECT_TRUE(
      PollFor([&] { return supervisor.Workers()[1].idle_since.has_value(); }, absl::Seconds(30)));
  EXPECT_FALSE(supervisor.Workers()[0].idle_since.has_value());
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(2)).ok());
}

TEST_F(WorkerSupervisorTest, Reassign_SurvivorWatchedOnNewFiles_HangDetectedThere) {
  Events events;
  WorkerSupervisor supervisor(FastHangOptions(console_fd_), RealClock::Get(), events.Callback());
  // Touches whatever heartbeat file its argument names, while it exists.
  const std::string control = run_dir_ + "/heartbeat_path";
  const std::string first = WorkerFilesFor(run_dir_, 0, 0).heartbeat_file;
  ASSERT_TRUE(MakeDirectories(run_dir_).ok());
  { std::ofstream(control) << first; }
  ASSERT_TRUE(supervisor
                  .Start({Script(run_dir_, 0,
                                 "while true; do p=$(cat " + control +
                                     "); [ -n \"$p\" ] && touch \"$p\"; sleep 0.05; done")})
                  .ok());
  const pid_t pid = supervisor.Workers()[0].pid;
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_TRUE(events.Await(0, absl::ZeroDuration()).empty());  // beating: not hung

  WorkerSpec next = Script(run_dir_, 0, "unused", /*global_offset=*/5);
  next.files = WorkerFilesFor(run_dir_, 2, 0);  // attempt_1
  ASSERT_TRUE(supervisor.Reassign(next).ok());
  EXPECT_EQ(supervisor.Workers()[0].pid, pid);  // the same process
  EXPECT_EQ(supervisor.Workers()[0].global_rank, 5);
  { std::ofstream(control) << next.files.heartbeat_file; }
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_TRUE(events.Await(0, absl::ZeroDuration()).empty());  // beating on the new file
  // Back to the old file only: silent on the watched one, so hung.
  { std::ofstream(control) << first; }
  std::vector<WorkerExit> hangs = events.Await(1, kPrompt);
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].kind, WorkerExit::Kind::kHung);
  EXPECT_EQ(hangs[0].global_rank, 5);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      supervisor.Reassign(Script(run_dir_, 7, "unused"))));  // no such slot
  ASSERT_TRUE(supervisor.Stop(absl::Seconds(5)).ok());
}

}  // namespace
}  // namespace ddp::client
