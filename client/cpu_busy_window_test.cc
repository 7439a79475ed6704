#include "client/cpu_busy_window.h"

#include <vector>

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
  cpu = Feed(w, kStart + absl::Seconds(2), 4, cpu, absl::Milliseconds(300));
  // The import ended (a second at 300 after 750): the window started again
  // there, and is not whole yet (the whole 5 s would say 390).
  EXPECT_EQ(w.reported_permille(), 0);
  Feed(w, kStart + absl::Seconds(6), 1, cpu, absl::Milliseconds(300));
  EXPECT_EQ(w.reported_permille(), 300);
}

TEST(CpuBusyWindowTest, Observe_StepsCutUnevenlyBySamples_StillReported) {
  // 0.45 s steps of 30 ms of CPU: a second holds two or three of them.
  CpuBusyWindow w(CpuBusyWindow::Options{});
  absl::Duration cpu;
  w.Observe(cpu, kStart);
  for (int i = 1; i <= 10; ++i) {
    cpu += absl::Milliseconds(i % 3 == 0 ? 90 : 60);
    w.Observe(cpu, kStart + absl::Seconds(i));
  }
  EXPECT_GE(w.reported_permille(), 60);
  EXPECT_LE(w.reported_permille(), 80);
}

// The first value of each rank is its steady share, however long its import
// took: had the window been reported with the import in it, these ranks of
// equal work would differ by a third.
TEST(CpuBusyWindowTest, Observe_ImportsEndingAtDifferentTimes_SameFirstValue) {
  std::vector<int> first;
  for (int import_seconds : {2, 4}) {
    CpuBusyWindow w(CpuBusyWindow::Options{});
    w.Observe(absl::ZeroDuration(), kStart);
    absl::Duration cpu = Feed(w, kStart, import_seconds, absl::ZeroDuration(),
                              absl::Milliseconds(1500) / import_seconds);
    for (int i = import_seconds; w.reported_permille() == 0 && i < 30; ++i) {
      cpu = Feed(w, kStart + absl::Seconds(i), 1, cpu, absl::Milliseconds(100));
    }
    first.push_back(w.reported_permille());
  }
  EXPECT_EQ(first, (std::vector<int>{100, 100}));
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

TEST(CpuBusyWindowTest, Observe_AsleepAfterWork_WithdrawnThenAtLeastOne) {
  CpuBusyWindow w(CpuBusyWindow::Options{});
  w.Observe(absl::ZeroDuration(), kStart);
  absl::Duration cpu = Feed(w, kStart, 5, absl::ZeroDuration(), absl::Milliseconds(300));
  ASSERT_EQ(w.reported_permille(), 300);
  Feed(w, kStart + absl::Seconds(5), 2, cpu, absl::ZeroDuration());
  EXPECT_EQ(w.reported_permille(), 0);  // a new phase: the old value withdrawn
  Feed(w, kStart + absl::Seconds(7), 4, cpu, absl::ZeroDuration());
  EXPECT_EQ(w.reported_permille(), 1);  // measured: told apart from "not yet"
}

// An import longer than the window is measured as a phase of its own; its
// value goes when it ends, not a window later.
TEST(CpuBusyWindowTest, Observe_StartLongerThanTheWindow_ValueWithdrawnAtItsEnd) {
  CpuBusyWindow w(CpuBusyWindow::Options{});
  w.Observe(absl::ZeroDuration(), kStart);
  absl::Duration cpu = Feed(w, kStart, 7, absl::ZeroDuration(), absl::Milliseconds(160));
  ASSERT_EQ(w.reported_permille(), 160);
  cpu = Feed(w, kStart + absl::Seconds(7), 1, cpu, absl::Milliseconds(60));
  EXPECT_EQ(w.reported_permille(), 160);  // one second may be noise
  cpu = Feed(w, kStart + absl::Seconds(8), 1, cpu, absl::Milliseconds(60));
  EXPECT_EQ(w.reported_permille(), 0);  // two are a new phase
  Feed(w, kStart + absl::Seconds(9), 3, cpu, absl::Milliseconds(60));
  EXPECT_EQ(w.reported_permille(), 60);
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
