#include "client/prewarm/standby_pool.h"

#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/worker_supervisor.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

// Loose bounds for real interpreters on a loaded 2-core machine.
constexpr absl::Duration kImport = absl::Seconds(60);
constexpr absl::Duration kRun = absl::Seconds(120);

std::string TestDir(const std::string& name) {
  const std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/", name);
  EXPECT_TRUE(MakeDirectories(dir).ok());
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The interpreter with PyTorch where there is one (Debian's), else python3.
std::string Python() {
  return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

std::string DumpScriptDir() {
  return absl::StrCat(getenv("TEST_SRCDIR"), "/", getenv("TEST_WORKSPACE"),
                      "/client/prewarm/testdata");
}

// A worker of generation `generation` running dump_main into `dir`/OUT.
WorkerSpec DumpSpec(const std::string& dir, int generation, bool as_module,
                    const std::vector<std::string>& extra_args = {}) {
  WorkerSpec spec;
  spec.local_rank = 0;
  spec.global_rank = generation;
  const std::string out = absl::StrCat(dir, "/dump.json");
  spec.argv =
      as_module ? std::vector<std::string>{Python(), "-u", "-m", "dump_main", out}
                : std::vector<std::string>{Python(), "-u", DumpScriptDir() + "/dump_main.py", out};
  spec.argv.insert(spec.argv.end(), extra_args.begin(), extra_args.end());
  spec.env = {{"PATH", getenv("PATH")},
              {"HOME", "/nonexistent"},
              {"LOCAL_RANK", "0"},
              {"RANK", absl::StrCat(generation)},
              {"MASTER_PORT", absl::StrCat(29500 + generation)},
              {"DDP_GENERATION", absl::StrCat(generation)}};
  if (as_module) spec.env["PYTHONPATH"] = DumpScriptDir();
  spec.files = WorkerFilesFor(dir, generation, 0);
  spec.redirect = Std::kAll;  // the traceback lands in stderr.log
  return spec;
}

// How dump_main writes one os.environ entry.
std::string EnvEntry(const std::string& key, const std::string& value) {
  return absl::StrCat("[\n   \"", key, "\",\n   \"", value, "\"\n  ]");
}

struct WorkerRun {
  std::string dump;
  std::string stderr_log;
  pid_t pid = -1;
  WorkerExit exit;
};

// A supervisor's options that start workers through `pool` (null: cold).
WorkerSupervisor::Options LaunchingFrom(StandbyPool* pool) {
  WorkerSupervisor::Options options;
  options.heartbeat_timeout = absl::ZeroDuration();
  if (pool != nullptr) {
    options.launch = [pool](const WorkerSpec& s, const WorkerStdio& stdio) {
      return pool->Launch(s, stdio);
    };
  }
  return options;
}

// Runs one worker through a WorkerSupervisor with `launch` (null: cold).
WorkerRun RunWorker(WorkerSpec spec, StandbyPool* pool) {
  const WorkerSupervisor::Options options = LaunchingFrom(pool);
  WorkerRun run;
  absl::Mutex mu;
  WorkerSupervisor supervisor(options, MonotonicClock::Get(), [&](const WorkerExit& exit) {
    absl::MutexLock lock(&mu);
    run.exit = exit;
  });
  const std::string dump_path = spec.argv[spec.argv[2] == "-m" ? 4 : 3];
  const WorkerFiles files = spec.files;
  EXPECT_TRUE(supervisor.Start({std::move(spec)}).ok());
  EXPECT_TRUE(supervisor.AwaitAllExited(kRun));
  run.pid = supervisor.Workers()[0].pid;
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(5)).ok());
  run.dump = ReadFile(dump_path);
  run.stderr_log = ReadFile(files.stderr_log);
  return run;
}

std::unique_ptr<StandbyPool> MakePool(const std::string& dir, std::vector<std::string> modules,
                                      absl::Duration refill_delay = absl::Seconds(3),
                                      absl::Duration master_wait = absl::Seconds(2),
                                      const Clock& clock = MonotonicClock::Get(),
                                      bool zygote = true) {
  StandbyPoolOptions options;
  options.zygote = zygote;
  options.master_wait = master_wait;
  options.modules = std::move(modules);
  options.python_exec = Python();
  options.site_dir = absl::StrCat(dir, "/prewarm");
  options.refill_delay = refill_delay;
  absl::StatusOr<std::unique_ptr<StandbyPool>> pool = StandbyPool::Create(options, clock);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? std::move(*pool) : nullptr;
}

// Everything of a cold start and a warm start of the same generation, with
// the directory names made equal.
void ExpectSameAsCold(bool as_module, bool zygote) {
  const std::string suffix = absl::StrCat(as_module ? "_m" : "", zygote ? "_z" : "");
  const std::string cold_dir = TestDir("cold" + suffix);
  const std::string warm_dir = TestDir("warm" + suffix);
  const WorkerRun cold = RunWorker(DumpSpec(cold_dir, 2, as_module, {"raise"}), nullptr);

  std::unique_ptr<StandbyPool> pool =
      MakePool(warm_dir, {"json", "email.mime.text"}, absl::Seconds(3), absl::Seconds(2),
               MonotonicClock::Get(), zygote);
  // Prepared with generation 1's environment, launched with generation 2's.
  WorkerSpec first = DumpSpec(warm_dir, 1, as_module, {"raise"});
  pool->Prepare(first, DirectConsoleTargets(first, 1, 2), absl::ZeroDuration());
  ASSERT_TRUE(pool->AwaitReady({0}, kImport));
  const WorkerRun warm = RunWorker(DumpSpec(warm_dir, 2, as_module, {"raise"}), pool.get());
  EXPECT_EQ(pool->counts().warm_starts, 1);
  EXPECT_EQ(pool->counts().cold_starts, 0);
  EXPECT_EQ(pool->counts().zygote_forks > 0, zygote);

  ASSERT_FALSE(cold.dump.empty());
  EXPECT_EQ(absl::StrReplaceAll(warm.dump, {{warm_dir, cold_dir}}), cold.dump);
  EXPECT_NE(cold.dump.find(EnvEntry("RANK", "2")), std::string::npos) << cold.dump;
  // The uncaught exception's traceback: the script's frames only, as cold.
  EXPECT_NE(cold.stderr_log.find("the script's own error"), std::string::npos);
  EXPECT_EQ(absl::StrReplaceAll(warm.stderr_log, {{warm_dir, cold_dir}}), cold.stderr_log);
  EXPECT_EQ(warm.exit.exit_code, 1);
  EXPECT_EQ(cold.exit.exit_code, 1);
}

TEST(StandbyPoolTest, WarmScript_ObservesWhatAColdStartObserves) {
  ExpectSameAsCold(/*as_module=*/false, /*zygote=*/false);
}

TEST(StandbyPoolTest, WarmModule_ObservesWhatAColdStartObserves) {
  ExpectSameAsCold(/*as_module=*/true, /*zygote=*/false);
}

TEST(StandbyPoolTest, ForkedByTheZygote_Script_ObservesWhatAColdStartObserves) {
  ExpectSameAsCold(/*as_module=*/false, /*zygote=*/true);
}

TEST(StandbyPoolTest, ForkedByTheZygote_Module_ObservesWhatAColdStartObserves) {
  ExpectSameAsCold(/*as_module=*/true, /*zygote=*/true);
}

TEST(StandbyPoolTest, AfterAWarmStart_ANewStandbyIsMade) {
  const std::string dir = TestDir("refill");
  std::unique_ptr<StandbyPool> pool = MakePool(dir, {"json"}, absl::Milliseconds(10));
  WorkerSpec spec = DumpSpec(dir, 1, false);
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  ASSERT_TRUE(pool->AwaitReady({0}, kImport));
  const WorkerRun first = RunWorker(DumpSpec(dir, 2, false), pool.get());
  ASSERT_TRUE(pool->AwaitReady({0}, kImport));
  const WorkerRun second = RunWorker(DumpSpec(dir, 3, false), pool.get());
  EXPECT_EQ(pool->counts().warm_starts, 2);
  EXPECT_NE(first.pid, second.pid);
  EXPECT_TRUE(first.exit.succeeded());
  EXPECT_TRUE(second.exit.succeeded());
  EXPECT_NE(second.dump.find(EnvEntry("RANK", "3")), std::string::npos) << second.dump;
}

// point 3 of issue 27: standbys at idle priority, refilled at once; the
// worker a standby becomes runs at normal priority.
TEST(StandbyPoolTest, IdleCpuPriority_StandbyIdleWorkerNormal_RefilledAtOnce) {
  if (!CanRestoreNormalCpuPriority()) {
    GTEST_SKIP() << "needs CAP_SYS_NICE or RLIMIT_NICE >= 20 to leave SCHED_IDLE";
  }
  const std::string dir = TestDir("idle");
  StandbyPoolOptions options;
  options.modules = {"json"};
  options.python_exec = Python();
  options.site_dir = absl::StrCat(dir, "/prewarm");
  options.refill_delay = absl::ZeroDuration();
  options.idle_cpu_priority = true;
  absl::StatusOr<std::unique_ptr<StandbyPool>> pool =
      StandbyPool::Create(options, MonotonicClock::Get());
  ASSERT_TRUE(pool.ok()) << pool.status();
  WorkerSpec spec = DumpSpec(dir, 1, false);
  const WorkerStdio stdio = DirectConsoleTargets(spec, 1, 2);
  (*pool)->Prepare(spec, stdio, absl::ZeroDuration());
  ASSERT_TRUE((*pool)->AwaitReady({0}, kImport));
  const pid_t standby = (*pool)->StandbyPids().at(0);
  // Made before any worker runs: nothing to yield to.
  EXPECT_EQ(sched_getscheduler(standby), SCHED_OTHER);

  ASSERT_TRUE(MakeDirectories(spec.files.dir).ok());
  absl::StatusOr<SpawnedWorker> worker = (*pool)->Launch(DumpSpec(dir, 2, false), stdio);
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->pid, standby);
  EXPECT_EQ(sched_getscheduler(worker->pid), SCHED_OTHER);  // a zombie keeps its policy
  int status = 0;
  EXPECT_EQ(waitpid(worker->pid, &status, 0), worker->pid);
  for (int fd : {worker->pidfd, worker->stdout_fd, worker->stderr_fd}) {
    if (fd >= 0) close(fd);
  }
  // The next standby comes at once, at idle priority.
  ASSERT_TRUE((*pool)->AwaitReady({0}, kImport));
  EXPECT_NE((*pool)->StandbyPids().at(0), standby);
  EXPECT_EQ(sched_getscheduler((*pool)->StandbyPids().at(0)), SCHED_IDLE);
}

// A standby whose import outlasts idle_import_limit at idle priority (a busy
// CPU) goes on at normal priority.
TEST(StandbyPoolTest, IdleCpuPriority_ImportTooSlow_PromotedToNormal) {
  if (!CanRestoreNormalCpuPriority()) {
    GTEST_SKIP() << "needs CAP_SYS_NICE or RLIMIT_NICE >= 20 to leave SCHED_IDLE";
  }
  const std::string dir = TestDir("idle_slow");
  // Fast the first time (the standby of Prepare), slow after (the refill).
  {
    std::ofstream(dir + "/slow_import.py")
        << "import os, time\nmarker = "
        << "'" << dir << "/imported_once'\n"
        << "if os.path.exists(marker):\n    time.sleep(60)\nopen(marker, 'w').close()\n";
  }
  StandbyPoolOptions options;
  options.modules = {"slow_import"};
  options.python_exec = Python();
  options.site_dir = absl::StrCat(dir, "/prewarm");
  options.idle_cpu_priority = true;
  options.refill_delay = absl::ZeroDuration();
  options.idle_import_limit = absl::Milliseconds(200);
  options.zygote = false;  // a fork imports nothing
  absl::StatusOr<std::unique_ptr<StandbyPool>> pool =
      StandbyPool::Create(options, MonotonicClock::Get());
  ASSERT_TRUE(pool.ok()) << pool.status();
  WorkerSpec spec = DumpSpec(dir, 1, false);
  spec.env["PYTHONPATH"] = dir;
  const WorkerStdio stdio = DirectConsoleTargets(spec, 1, 2);
  (*pool)->Prepare(spec, stdio, absl::ZeroDuration());
  ASSERT_TRUE((*pool)->AwaitReady({0}, kImport));
  const pid_t first = (*pool)->StandbyPids().at(0);
  WorkerSpec next = DumpSpec(dir, 2, false);
  next.env["PYTHONPATH"] = dir;
  ASSERT_TRUE(MakeDirectories(next.files.dir).ok());
  absl::StatusOr<SpawnedWorker> worker = (*pool)->Launch(next, stdio);
  ASSERT_TRUE(worker.ok()) << worker.status();
  ASSERT_EQ(worker->pid, first);
  int status = 0;
  EXPECT_EQ(waitpid(worker->pid, &status, 0), worker->pid);
  for (int fd : {worker->pidfd, worker->stdout_fd, worker->stderr_fd}) {
    if (fd >= 0) close(fd);
  }
  const absl::Time deadline = absl::Now() + kImport;
  pid_t standby = -1;
  while (absl::Now() < deadline && standby < 0) {
    auto pids = (*pool)->StandbyPids();
    if (pids.count(0) > 0 && pids.at(0) != first) standby = pids.at(0);
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GT(standby, 0);
  while (absl::Now() < deadline && sched_getscheduler(standby) != SCHED_OTHER) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(sched_getscheduler(standby), SCHED_OTHER);
  EXPECT_EQ((*pool)->counts().standbys_ready, 0);  // still importing
}

// The refill after a warm start waits refill_delay on the pool's clock, not
// the wall's: a FakeClock that does not move holds it back however long the
// test runs. A standby due at once for another rank marks a pass of the
// pool's thread that saw the refill and left it.
TEST(StandbyPoolTest, Refill_WaitsTheRefillDelayOnThePoolsClock) {
  FakeClock clock;
  const std::string dir = TestDir("refill_clock");
  std::unique_ptr<StandbyPool> pool =
      MakePool(dir, {"json"}, absl::Hours(1), absl::Seconds(2), clock, /*zygote=*/false);
  WorkerSpec spec = DumpSpec(dir, 1, false);
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  ASSERT_TRUE(pool->AwaitReady({0}, kImport));
  const WorkerRun run = RunWorker(DumpSpec(dir, 2, false), pool.get());
  ASSERT_EQ(pool->counts().warm_starts, 1);
  auto prepare_now = [&](int local_rank) {
    WorkerSpec other = DumpSpec(dir, 1, false);
    other.local_rank = local_rank;
    pool->Prepare(other, DirectConsoleTargets(other, 1, 2), absl::ZeroDuration());
    return pool->AwaitReady({local_rank}, kImport);
  };

  ASSERT_TRUE(prepare_now(1));
  EXPECT_EQ(pool->StandbyPids().count(0), 0) << "refilled before refill_delay";
  clock.Advance(absl::Hours(1) - absl::Seconds(1));
  ASSERT_TRUE(prepare_now(2));
  EXPECT_EQ(pool->StandbyPids().count(0), 0) << "refilled before refill_delay";
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(pool->AwaitReady({0}, kImport));
}

TEST(StandbyPoolTest, StaticEnvironmentChanged_StartsColdWithTheNewOne) {
  const std::string dir = TestDir("changed");
  std::unique_ptr<StandbyPool> pool = MakePool(dir, {"json"});
  WorkerSpec prepared = DumpSpec(dir, 1, false);
  prepared.env["CUDA_VISIBLE_DEVICES"] = "0";
  pool->Prepare(prepared, DirectConsoleTargets(prepared, 1, 2), absl::ZeroDuration());
  ASSERT_TRUE(pool->AwaitReady({0}, kImport));
  WorkerSpec launched = DumpSpec(dir, 2, false);
  launched.env["CUDA_VISIBLE_DEVICES"] = "1";
  const WorkerRun run = RunWorker(launched, pool.get());
  EXPECT_EQ(pool->counts().warm_starts, 0);
  EXPECT_EQ(pool->counts().cold_starts, 1);
  EXPECT_NE(run.dump.find(EnvEntry("CUDA_VISIBLE_DEVICES", "1")), std::string::npos) << run.dump;
}

TEST(StandbyPoolTest, StandbyKilled_StartsColdWithTheReason) {
  const std::string dir = TestDir("killed");
  std::unique_ptr<StandbyPool> pool = MakePool(dir, {"json"}, absl::Seconds(3), absl::Seconds(2),
                                               MonotonicClock::Get(), /*zygote=*/false);
  WorkerSpec spec = DumpSpec(dir, 1, false);
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  ASSERT_TRUE(pool->AwaitReady({0}, kImport));
  const pid_t standby = pool->StandbyPids().at(0);
  ASSERT_EQ(kill(standby, SIGKILL), 0);
  absl::SleepFor(absl::Milliseconds(300));  // SIGKILL takes effect asynchronously
  const WorkerRun run = RunWorker(DumpSpec(dir, 2, false), pool.get());
  EXPECT_TRUE(run.exit.succeeded());
  EXPECT_NE(run.pid, standby);
  EXPECT_EQ(pool->counts().warm_starts, 0);
  EXPECT_EQ(pool->counts().cold_starts, 1);
  EXPECT_NE(run.dump.find(EnvEntry("RANK", "2")), std::string::npos) << run.dump;
  // Killed is not broken: a new standby comes.
  EXPECT_TRUE(pool->AwaitReady({0}, kImport));
}

TEST(StandbyPoolTest, ImportFails_StartsColdAndDoesNotRetry) {
  const std::string dir = TestDir("import_fails");
  std::unique_ptr<StandbyPool> pool = MakePool(dir, {"json", "no_such_module_for_ddp_test"});
  WorkerSpec spec = DumpSpec(dir, 1, false);
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  EXPECT_FALSE(pool->AwaitReady({0}, absl::Seconds(3)));
  const WorkerRun run = RunWorker(DumpSpec(dir, 2, false), pool.get());
  EXPECT_TRUE(run.exit.succeeded());
  EXPECT_EQ(pool->counts().cold_starts, 1);
  // The same command again: no new standby (the import would fail again).
  EXPECT_FALSE(pool->AwaitReady({0}, absl::Seconds(2)));
}

// Optional modules (the agent's ddp_coordinator.recovery under
// --in-process-restart): imported where they can be; one that cannot be does
// not spoil the standby.
TEST(StandbyPoolTest, OptionalModules_ImportedWhereTheyCanBe_AMissingOneSkipped) {
  for (bool zygote : {false, true}) {
    const std::string dir = TestDir(zygote ? "optional_z" : "optional");
    StandbyPoolOptions options;
    options.zygote = zygote;
    options.zygote_stdout_fd = 1;
    options.zygote_stderr_fd = 2;
    options.modules = {"json"};
    options.optional_modules = {"no_such_module_for_ddp_test", "xml.dom.minidom"};
    options.python_exec = Python();
    options.site_dir = absl::StrCat(dir, "/prewarm");
    absl::StatusOr<std::unique_ptr<StandbyPool>> pool =
        StandbyPool::Create(options, MonotonicClock::Get());
    ASSERT_TRUE(pool.ok()) << pool.status();
    const std::vector<std::string> ask = {"loaded=xml.dom.minidom,email.mime.text"};
    WorkerSpec spec = DumpSpec(dir, 1, false, ask);
    (*pool)->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
    ASSERT_TRUE((*pool)->AwaitReady({0}, kImport)) << "zygote " << zygote;
    const WorkerRun run = RunWorker(DumpSpec(dir, 2, false, ask), pool->get());
    EXPECT_EQ((*pool)->counts().warm_starts, 1) << "zygote " << zygote;
    EXPECT_TRUE(run.exit.succeeded());
    EXPECT_NE(run.dump.find(R"("xml.dom.minidom": true)"), std::string::npos) << run.dump;
    EXPECT_NE(run.dump.find(R"("email.mime.text": false)"), std::string::npos) << run.dump;
  }
}

TEST(StandbyPoolTest, NotAPythonCommand_StartsCold) {
  const std::string dir = TestDir("not_python");
  std::unique_ptr<StandbyPool> pool = MakePool(dir, {"json"});
  WorkerSpec spec = DumpSpec(dir, 1, false);
  spec.argv = {"/bin/sh", "-c", absl::StrCat("echo $RANK > ", dir, "/rank.txt")};
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  WorkerSupervisor supervisor(LaunchingFrom(pool.get()), MonotonicClock::Get(), nullptr);
  ASSERT_TRUE(supervisor.Start({spec}).ok());
  EXPECT_TRUE(supervisor.AwaitAllExited(kRun));
  EXPECT_EQ(ReadFile(dir + "/rank.txt"), "1\n");
  EXPECT_EQ(pool->counts().cold_starts, 1);
}

TEST(StandbyPoolTest, Destroyed_StandbysEndAndAreReaped) {
  const std::string dir = TestDir("destroyed");
  std::unique_ptr<StandbyPool> pool = MakePool(dir, {"json"});
  WorkerSpec spec = DumpSpec(dir, 1, false);
  spec.local_rank = 0;
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  spec.local_rank = 1;
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  ASSERT_TRUE(pool->AwaitReady({0, 1}, kImport));
  EXPECT_EQ(pool->counts().standbys_ready, 2);
  pool.reset();
  // Reaped: no child of this process is left (ECHILD), none ran the script.
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  EXPECT_EQ(access((dir + "/dump.json").c_str(), F_OK), -1);
}

// A loopback port bound and never listened on: connections to it are refused.
void BindWithoutListening(int* fd, std::string* port) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(*fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(*fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  *port = absl::StrCat(ntohs(address.sin_port));
}

// A MASTER_PORT where nothing listens (a script without torch's store): the
// first rank other than 0 waits master_wait, the next ones do not wait again.
TEST(StandbyPoolTest, NothingListensAtMasterPort_OnlyOneWait) {
  const std::string dir = TestDir("no_master");
  int silent_fd = -1;
  std::string port;
  ASSERT_NO_FATAL_FAILURE(BindWithoutListening(&silent_fd, &port));

  std::unique_ptr<StandbyPool> pool =
      MakePool(dir, {"json"}, absl::Seconds(3), absl::Milliseconds(600));
  std::vector<WorkerSpec> specs;
  for (int local_rank = 0; local_rank < 3; ++local_rank) {
    WorkerSpec spec = DumpSpec(absl::StrCat(dir, "/", local_rank), 1, false);
    spec.local_rank = local_rank;
    spec.env["LOCAL_RANK"] = absl::StrCat(local_rank);
    spec.env["RANK"] = absl::StrCat(local_rank + 1);
    spec.env["MASTER_ADDR"] = "127.0.0.1";
    spec.env["MASTER_PORT"] = port;
    ASSERT_TRUE(MakeDirectories(absl::StrCat(dir, "/", local_rank)).ok());
    pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
    specs.push_back(spec);
  }
  ASSERT_TRUE(pool->AwaitReady({0, 1, 2}, kImport));
  WorkerSupervisor supervisor(LaunchingFrom(pool.get()), MonotonicClock::Get(), nullptr);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(supervisor.Start(specs).ok());
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(550));
  EXPECT_LT(took, absl::Milliseconds(1150)) << "each rank waited";
  EXPECT_TRUE(supervisor.AwaitAllExited(kRun));
  EXPECT_EQ(pool->counts().warm_starts, 3);
  close(silent_fd);
}

// A rank whose worker waits for the store itself (await_master false: an in-process
// restart's new rank) starts at once, even where nothing listens at MASTER_PORT.
TEST(StandbyPoolTest, AwaitMasterOff_StartsWithoutWaitingForTheStore) {
  const std::string dir = TestDir("no_master_wait");
  int silent_fd = -1;
  std::string port;
  ASSERT_NO_FATAL_FAILURE(BindWithoutListening(&silent_fd, &port));

  std::unique_ptr<StandbyPool> pool =
      MakePool(dir, {"json"}, absl::Seconds(3), absl::Seconds(20));
  WorkerSpec spec = DumpSpec(dir, 1, false);
  spec.env["MASTER_ADDR"] = "127.0.0.1";
  spec.env["MASTER_PORT"] = port;
  spec.await_master = false;
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  ASSERT_TRUE(pool->AwaitReady({0}, kImport));
  WorkerSupervisor supervisor(LaunchingFrom(pool.get()), MonotonicClock::Get(), nullptr);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(supervisor.Start({spec}).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "waited for the store (20 s)";
  EXPECT_TRUE(supervisor.AwaitAllExited(kRun));
  EXPECT_EQ(pool->counts().warm_starts, 1);
  close(silent_fd);
}

// --- The zygote (issue 27, "warm at any moment") ---

// A module for --prewarm that appends a line to `dir`/imports at each import
// (and, with `needs_local_rank`, reads LOCAL_RANK as it does so).
void WriteCountingModule(const std::string& dir, bool needs_local_rank = false) {
  std::ofstream(dir + "/counted_import.py")
      << "import os\n"
      << (needs_local_rank ? "os.environ['LOCAL_RANK']\n" : "") << "with open("
      << "'" << dir << "/imports', 'a') as f:\n    f.write('x\\n')\n";
}

int Lines(const std::string& path) {
  const std::string text = ReadFile(path);
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

pid_t ParentOf(pid_t pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  std::istringstream fields(stat.substr(stat.rfind(')') + 1));
  std::string state;
  pid_t parent = -1;
  fields >> state >> parent;
  return parent;
}

WorkerSpec RankSpec(const std::string& dir, int local_rank,
                    const std::vector<std::string>& extra_args = {}) {
  WorkerSpec spec = DumpSpec(dir, 1, false, extra_args);
  spec.local_rank = local_rank;
  spec.files = WorkerFilesFor(dir, 1, local_rank);
  spec.env["LOCAL_RANK"] = absl::StrCat(local_rank);
  spec.env["PYTHONPATH"] = dir;
  return spec;
}

// One import for every rank; each standby is this process's child (waitpid
// works) and leads its own process group.
TEST(StandbyPoolTest, Zygote_OneImportForEveryRank_StandbysAreOurChildren) {
  const std::string dir = TestDir("zygote_ranks");
  WriteCountingModule(dir);
  std::unique_ptr<StandbyPool> pool = MakePool(dir, {"counted_import"});
  for (int rank = 0; rank < 3; ++rank) {
    const WorkerSpec spec = RankSpec(dir, rank, {"raise"});
    pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  }
  ASSERT_TRUE(pool->AwaitReady({0, 1, 2}, kImport));
  EXPECT_EQ(Lines(dir + "/imports"), 1);
  EXPECT_EQ(pool->counts().zygote_forks, 3);
  const pid_t zygote = pool->ZygotePid();
  EXPECT_GT(zygote, 0);
  for (const auto& [rank, pid] : pool->StandbyPids()) {
    EXPECT_EQ(ParentOf(pid), getpid()) << "rank " << rank;
    EXPECT_EQ(getpgid(pid), pid) << "rank " << rank;
    EXPECT_NE(pid, zygote);
  }
  // A warm worker from a forked standby: its exit status through waitpid.
  WorkerSpec next = RankSpec(dir, 1, {"raise"});
  next.global_rank = 2;
  next.env["RANK"] = "2";
  const WorkerRun run = RunWorker(next, pool.get());
  EXPECT_EQ(run.exit.exit_code, 1);
  EXPECT_NE(run.stderr_log.find("the script's own error"), std::string::npos) << run.stderr_log;
  EXPECT_EQ(pool->counts().warm_starts, 1);
  EXPECT_EQ(Lines(dir + "/imports"), 1);
}

// The first generation starts while the zygote still imports: each rank
// waits for its fork, as for a standby still importing, and starts warm.
TEST(StandbyPoolTest, Zygote_LaunchedWhileItImports_StartsWarm) {
  const std::string dir = TestDir("zygote_importing");
  std::ofstream(dir + "/slow_import.py") << "import time\ntime.sleep(1)\n";
  std::unique_ptr<StandbyPool> pool = MakePool(dir, {"slow_import"});
  WorkerSpec spec = DumpSpec(dir, 1, false);
  spec.env["PYTHONPATH"] = dir;
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  WorkerSpec next = DumpSpec(dir, 2, false);
  next.env["PYTHONPATH"] = dir;
  const WorkerRun run = RunWorker(next, pool.get());
  EXPECT_TRUE(run.exit.succeeded());
  EXPECT_EQ(pool->counts().warm_starts, 1);
  EXPECT_EQ(pool->counts().cold_starts, 0);
}

// The refill after a start is forked zygote_refill_delay (250 ms) after it,
// whatever refill_delay says (an hour here; a FakeClock that moves only when
// told): a failure 1 s after a start finds it ready, and the start's process
// group does not share the CPU with the fork.
TEST(StandbyPoolTest, Zygote_RefillAfterZygoteRefillDelay_WhateverTheRefillDelay) {
  FakeClock clock;
  const std::string dir = TestDir("zygote_refill");
  std::unique_ptr<StandbyPool> pool =
      MakePool(dir, {"json"}, absl::Hours(1), absl::Seconds(2), clock);
  WorkerSpec spec = DumpSpec(dir, 1, false);
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  ASSERT_TRUE(pool->AwaitReady({0}, kImport));
  const pid_t first = pool->StandbyPids().at(0);
  const WorkerRun run = RunWorker(DumpSpec(dir, 2, false), pool.get());
  EXPECT_EQ(run.pid, first);
  absl::SleepFor(absl::Milliseconds(500));  // real time; the pool's clock stands still
  EXPECT_EQ(pool->counts().zygote_forks, 1) << "refilled before zygote_refill_delay";
  clock.Advance(absl::Milliseconds(250));
  ASSERT_TRUE(pool->AwaitReady({0}, absl::Seconds(20)));
  EXPECT_NE(pool->StandbyPids().at(0), first);
  EXPECT_EQ(pool->counts().zygote_forks, 2);
}

// A standby killed from outside is forked again at once.
TEST(StandbyPoolTest, Zygote_StandbyKilled_ReplacedAtOnce) {
  const std::string dir = TestDir("zygote_standby_killed");
  std::unique_ptr<StandbyPool> pool = MakePool(dir, {"json"});
  WorkerSpec spec = DumpSpec(dir, 1, false);
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  ASSERT_TRUE(pool->AwaitReady({0}, kImport));
  const pid_t standby = pool->StandbyPids().at(0);
  ASSERT_EQ(kill(standby, SIGKILL), 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline && pool->StandbyPids().count(0) > 0 &&
         pool->StandbyPids().at(0) == standby) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(pool->AwaitReady({0}, absl::Seconds(20)));
  EXPECT_NE(pool->StandbyPids().at(0), standby);
  const WorkerRun run = RunWorker(DumpSpec(dir, 2, false), pool.get());
  EXPECT_TRUE(run.exit.succeeded());
  EXPECT_EQ(pool->counts().warm_starts, 1);
}

// A zygote killed: the next standby comes from a new zygote.
TEST(StandbyPoolTest, Zygote_Killed_ANewOneForkTheNextStandby) {
  const std::string dir = TestDir("zygote_killed");
  std::unique_ptr<StandbyPool> pool = MakePool(dir, {"json"});
  WorkerSpec spec = DumpSpec(dir, 1, false);
  pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  ASSERT_TRUE(pool->AwaitReady({0}, kImport));
  const pid_t zygote = pool->ZygotePid();
  ASSERT_GT(zygote, 0);
  ASSERT_EQ(kill(zygote, SIGKILL), 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline && pool->ZygotePid() == zygote) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(pool->ZygotePid(), -1);
  // The standby forked before lives on.
  const WorkerRun run = RunWorker(DumpSpec(dir, 2, false), pool.get());
  EXPECT_TRUE(run.exit.succeeded());
  EXPECT_EQ(pool->counts().warm_starts, 1);
  // Its refill needed a new zygote.
  ASSERT_TRUE(pool->AwaitReady({0}, kImport));
  EXPECT_GT(pool->ZygotePid(), 0);
  EXPECT_NE(pool->ZygotePid(), zygote);
  EXPECT_EQ(pool->counts().zygote_forks, 2);
}

// A module that needs LOCAL_RANK at import: the zygote (which has none)
// fails, each rank's standby imports on its own (with it) and serves.
TEST(StandbyPoolTest, Zygote_ImportFails_EachRankImportsOnItsOwn) {
  const std::string dir = TestDir("zygote_import_fails");
  WriteCountingModule(dir, /*needs_local_rank=*/true);
  std::unique_ptr<StandbyPool> pool = MakePool(dir, {"counted_import"});
  for (int rank = 0; rank < 2; ++rank) {
    const WorkerSpec spec = RankSpec(dir, rank);
    pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
  }
  ASSERT_TRUE(pool->AwaitReady({0, 1}, kImport));
  EXPECT_EQ(pool->counts().zygote_forks, 0);
  EXPECT_EQ(pool->ZygotePid(), -1);
  EXPECT_EQ(Lines(dir + "/imports"), 2);
  WorkerSpec next = RankSpec(dir, 0);
  next.env["RANK"] = "2";
  const WorkerRun run = RunWorker(next, pool.get());
  EXPECT_TRUE(run.exit.succeeded());
  EXPECT_EQ(pool->counts().warm_starts, 1);
}

// The agent killed -9 (here a child process of the test that runs a pool
// and a warm worker): no zygote, standby or worker is left.
TEST(StandbyPoolTest, Zygote_AgentKilled_NoWorkerNorStandbyLeft) {
  // fork() below needs a single-threaded test process (the pools of the
  // tests before are gone with their threads).
  int threads = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++threads;
  }
  ASSERT_EQ(threads, 1);
  const std::string dir = TestDir("agent_killed");
  std::ofstream(dir + "/sleeper.py") << "import time\ntime.sleep(600)\n";
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t agent = fork();
  if (agent == 0) {
    close(report[0]);
    std::vector<pid_t> pids(4, -1);
    {
      std::unique_ptr<StandbyPool> pool = MakePool(dir, {"json"});
      for (int rank = 0; rank < 2; ++rank) {
        WorkerSpec spec = RankSpec(dir, rank);
        spec.argv = {Python(), "-u", dir + "/sleeper.py"};
        pool->Prepare(spec, DirectConsoleTargets(spec, 1, 2), absl::ZeroDuration());
      }
      if (pool->AwaitReady({0, 1}, kImport)) {
        pids[0] = pool->ZygotePid();
        pids[1] = pool->StandbyPids().at(1);
        WorkerSpec spec = RankSpec(dir, 0);
        spec.argv = {Python(), "-u", dir + "/sleeper.py"};
        absl::StatusOr<SpawnedWorker> worker = pool->Launch(spec, DirectConsoleTargets(spec, 1, 2));
        if (worker.ok()) pids[2] = worker->pid;
        // The refill of rank 0, forked at once.
        if (pool->AwaitReady({0}, kImport)) pids[3] = pool->StandbyPids().at(0);
      }
      (void)!write(report[1], pids.data(), pids.size() * sizeof(pid_t));
      pause();  // until SIGKILL
    }
    _exit(1);
  }
  close(report[1]);
  std::vector<pid_t> pids(4, -1);
  ASSERT_EQ(read(report[0], pids.data(), pids.size() * sizeof(pid_t)),
            static_cast<ssize_t>(pids.size() * sizeof(pid_t)));
  close(report[0]);
  std::vector<int> pidfds;
  for (pid_t pid : pids) {
    pidfds.push_back(pid > 0 ? static_cast<int>(syscall(SYS_pidfd_open, pid, 0)) : -1);
  }
  ASSERT_EQ(kill(agent, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(agent, &status, 0), agent);
  for (size_t i = 0; i < pids.size(); ++i) {
    ASSERT_GT(pids[i], 0) << "the agent's pool did not get ready";
    ASSERT_GE(pidfds[i], 0) << "pid " << pids[i] << " was gone before the agent";
  }
  const char* names[] = {"the zygote", "a standby", "a warm worker", "a refilled standby"};
  for (size_t i = 0; i < pidfds.size(); ++i) {
    pollfd exited{pidfds[i], POLLIN, 0};
    EXPECT_EQ(poll(&exited, 1, 20000), 1)
        << names[i] << " (pid " << pids[i] << ") outlived the agent";
    close(pidfds[i]);
  }
}

TEST(StartMessageTest, EndsWithAnEmptyEntry) {
  EXPECT_EQ(EncodeStartMessage({{"A", "1"}, {"B", "x=y"}}), std::string("A=1\0B=x=y\0\0", 11));
  EXPECT_EQ(EncodeStartMessage({}), std::string("\0", 1));
}

TEST(IsWarmableCommandTest, OnlyThePythonExecWithU) {
  EXPECT_TRUE(IsWarmableCommand({"python3", "-u", "train.py"}, "python3"));
  EXPECT_TRUE(IsWarmableCommand({"python3", "-u", "-m", "pkg.train"}, "python3"));
  EXPECT_FALSE(IsWarmableCommand({"/usr/bin/python3", "-u", "train.py"}, "python3"));
  EXPECT_FALSE(IsWarmableCommand({"./train.sh"}, "python3"));
  EXPECT_FALSE(IsWarmableCommand({"python3", "train.py"}, "python3"));
}

}  // namespace
}  // namespace ddp::client
