#include "client/cpu_busy_window.h"

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

// Feeds one sample per second after `from` for `seconds`, the group's CPU
// growing by `cpu_per_second`; returns the CPU reached.
absl::Duration Feed(CpuBusyWindow& w, absl::Time from, int seconds, absl::Duration cpu,
                    absl::Duration cpu_per_second) {
  for (int i = 0; i < seconds; ++i) {
    cpu += cpu_per_second;
    w.Observe(cpu, from + absl::Seconds(i + 1));
  }
  return cpu;
}

TEST(CpuBusyWindowTest, Observe_BeforeAWholeWindow_NothingReported) {
  CpuBusyWindow w(CpuBusyWindow::Options{});
  w.Observe(absl::Seconds(2), kStart);
  Feed(w, kStart, 4, absl::Seconds(2), absl::Milliseconds(200));
  EXPECT_EQ(w.reported_permille(), 0);
  Feed(w, kStart + absl::Seconds(4), 1, absl::Milliseconds(2800), absl::Milliseconds(200));
  EXPECT_EQ(w.reported_permille(), 200);
}

TEST(CpuBusyWindowTest, Observe_ImportThenSteadyWork_OnlyTheLastWindowCounts) {
  CpuBusyWindow w(CpuBusyWindow::Options{});
  w.Observe(absl::ZeroDuration(), kStart);
  // import torch: 1.5 s of CPU in the first two seconds, then 30 % of a core.
  absl::Duration cpu = Feed(w, kStart, 2, absl::ZeroDuration(), absl::Milliseconds(750));
  cpu = Feed(w, kStart + absl::Seconds(2), 3, cpu, absl::Milliseconds(300));
  EXPECT_EQ(w.reported_permille(), 480);  // (1.5 s + 0.9 s) / 5 s
  Feed(w, kStart + absl::Seconds(5), 2, cpu, absl::Milliseconds(300));
  EXPECT_EQ(w.reported_permille(), 300);
}

TEST(CpuBusyWindowTest, Observe_SmallChanges_ReportedValueStays) {
  CpuBusyWindow w(CpuBusyWindow::Options{});
  w.Observe(absl::ZeroDuration(), kStart);
  absl::Duration cpu = Feed(w, kStart, 5, absl::ZeroDuration(), absl::Milliseconds(300));
  ASSERT_EQ(w.reported_permille(), 300);
  // 4 % more: within the window's jitter, the heartbeat stays the same.
  cpu = Feed(w, kStart + absl::Seconds(5), 5, cpu, absl::Milliseconds(312));
  EXPECT_EQ(w.reported_permille(), 300);
  // 50 % more (a slower rank): reported once the window shows it.
  Feed(w, kStart + absl::Seconds(10), 5, cpu, absl::Milliseconds(450));
  EXPECT_EQ(w.reported_permille(), 450);
}

TEST(CpuBusyWindowTest, Observe_AsleepAfterWork_FallsToAtLeastOne) {
  CpuBusyWindow w(CpuBusyWindow::Options{});
  w.Observe(absl::ZeroDuration(), kStart);
  absl::Duration cpu = Feed(w, kStart, 5, absl::ZeroDuration(), absl::Milliseconds(300));
  Feed(w, kStart + absl::Seconds(5), 6, cpu, absl::ZeroDuration());
  EXPECT_EQ(w.reported_permille(), 1);  // measured: told apart from "not yet"
}

TEST(CpuBusyWindowTest, Observe_TotalShrinks_WindowStartsAgain) {
  CpuBusyWindow w(CpuBusyWindow::Options{});
  w.Observe(absl::ZeroDuration(), kStart);
  Feed(w, kStart, 5, absl::ZeroDuration(), absl::Milliseconds(300));
  ASSERT_EQ(w.reported_permille(), 300);
  // A child's CPU left the count: 4 s after, not yet a whole window again.
  Feed(w, kStart + absl::Seconds(5), 4, absl::Milliseconds(100), absl::Milliseconds(900));
  EXPECT_EQ(w.reported_permille(), 300);
  Feed(w, kStart + absl::Seconds(9), 2, absl::Milliseconds(100) + absl::Milliseconds(3600),
       absl::Milliseconds(900));
  EXPECT_EQ(w.reported_permille(), 900);
}

TEST(CpuBusyWindowTest, Restart_FrozenWorker_FrozenTimeNotCounted) {
  CpuBusyWindow w(CpuBusyWindow::Options{});
  w.Observe(absl::ZeroDuration(), kStart);
  absl::Duration cpu = Feed(w, kStart, 5, absl::ZeroDuration(), absl::Milliseconds(300));
  // Frozen for 20 s: no CPU, and no sample meanwhile.
  w.Restart();
  w.Observe(cpu, kStart + absl::Seconds(25));
  cpu = Feed(w, kStart + absl::Seconds(25), 5, cpu, absl::Milliseconds(300));
  EXPECT_EQ(w.reported_permille(), 300);
}

}  // namespace
}  // namespace ddp::client
