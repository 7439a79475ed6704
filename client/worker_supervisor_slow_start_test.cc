// A lease that runs out while the workers are still being spawned (a slow
// start: a loaded machine, a slow disk): Freeze() during Start() must still
// stop them, as soon as they are spawned, and not let them run on without a
// lease. The target sets DDP_FAILPOINTS="workers_spawned=sleep(800)", so every
// Start here takes 800 ms after its workers are spawned.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/worker_process.h"
#include "client/worker_supervisor.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

TEST(WorkerSupervisorSlowStart, FrozenWhileSpawning_StoppedOnceSpawned) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string run_dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/slow_start");
  const std::string ticks = run_dir + "/ticks";
  WorkerSupervisor::Options options;
  const int console = open("/dev/null", O_WRONLY);
  options.console_out_fd = console;
  options.console_err_fd = console;
  options.heartbeat_timeout = absl::ZeroDuration();
  WorkerSupervisor supervisor(options, RealClock::Get(), [](const WorkerExit&) {});
  WorkerSpec spec;
  spec.argv = {"/bin/sh", "-c", "while true; do echo x >> " + ticks + "; sleep 0.02; done"};
  spec.files = WorkerFilesFor(run_dir, 0, 0);
  spec.env = CurrentEnvironment();
  absl::Status started;
  std::thread start([&] { started = supervisor.Start({spec}); });
  absl::SleepFor(absl::Milliseconds(300));  // Start is still in its 800 ms
  supervisor.Freeze();
  start.join();
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_TRUE(supervisor.frozen());
  // Stopped: the loop, which appends a line every 20 ms, appends nothing for 600 ms. (The
  // state letter alone is not enough: a shell frozen while it forks `sleep` reads 'D' for as
  // long as it is frozen, a vfork parent waiting for its stopped child.)
  auto size_of = [&] {
    struct stat st;
    return stat(ticks.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : int64_t{-1};
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool stopped = false;
  while (!stopped && absl::Now() < deadline) {
    const int64_t before = size_of();
    absl::SleepFor(absl::Milliseconds(600));
    stopped = size_of() == before;
  }
  EXPECT_TRUE(stopped) << "a worker spawned before the freeze runs on without a lease";
  supervisor.Thaw();
  const int64_t thawed = size_of();
  const absl::Time resumed_by = absl::Now() + absl::Seconds(10);
  while (size_of() == thawed && absl::Now() < resumed_by) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_GT(size_of(), thawed) << "thawed, the worker does not run again";
  EXPECT_TRUE(supervisor.Stop(absl::Seconds(5)).ok());
  close(console);
}

}  // namespace
}  // namespace ddp::client
