#include "client/activity_tracker.h"

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

ProcessGroupSample Sample(absl::Duration cpu, int64_t io_bytes = 0, bool disk_wait = false) {
  ProcessGroupSample s;
  s.processes = 1;
  s.cpu = cpu;
  s.io_bytes = io_bytes;
  s.in_disk_wait = disk_wait;
  return s;
}

ActivityTracker::Options TenSeconds() {
  ActivityTracker::Options o;
  o.hang_timeout = absl::Seconds(10);
  return o;
}

// Feeds one sample per second from `from` for `seconds`, CPU growing by
// `cpu_per_second`; returns the CPU reached.
absl::Duration Feed(ActivityTracker& t, absl::Time from, int seconds, absl::Duration cpu,
                    absl::Duration cpu_per_second) {
  for (int i = 0; i < seconds; ++i) {
    cpu += cpu_per_second;
    t.Observe(Sample(cpu), from + absl::Seconds(i + 1));
  }
  return cpu;
}

TEST(ActivityTrackerTest, Observe_SleepAfterTraining_HungAfterTimeout) {
  ActivityTracker t(TenSeconds());
  t.Observe(Sample(absl::Seconds(2)), kStart);                                  // torch imported
  absl::Duration cpu = Feed(t, kStart, 5, absl::Seconds(2), absl::Seconds(1));  // steps
  // Asleep: a tick every 3 s, as measured on a gloo worker.
  const absl::Time asleep = kStart + absl::Seconds(5);
  for (int i = 1; i <= 11; ++i) {
    if (i % 3 == 0) cpu += absl::Milliseconds(10);
    t.Observe(Sample(cpu), asleep + absl::Seconds(i));
    if (i <= 10) {
      EXPECT_FALSE(t.Hung(asleep + absl::Seconds(i))) << i;
    }
  }
  EXPECT_TRUE(t.Hung(asleep + absl::Seconds(11)));
  EXPECT_EQ(t.IdleFor(asleep + absl::Seconds(11)), absl::Seconds(11));
  EXPECT_EQ(*t.last_active(), asleep);
}

TEST(ActivityTrackerTest, Observe_CpuBoundLoad_NeverHung) {
  ActivityTracker t(TenSeconds());
  t.Observe(Sample(absl::Seconds(2)), kStart);
  Feed(t, kStart, 60, absl::Seconds(2), absl::Milliseconds(900));  // unpickling
  EXPECT_FALSE(t.Hung(kStart + absl::Seconds(60)));
}

TEST(ActivityTrackerTest, Observe_BytesMovedWithLittleCpu_Active) {
  ActivityTracker t(TenSeconds());
  t.Observe(Sample(absl::Seconds(2), 0), kStart);
  for (int i = 1; i <= 30; ++i) {
    t.Observe(Sample(absl::Seconds(2), i * 4096), kStart + absl::Seconds(i));  // a slow read
  }
  EXPECT_FALSE(t.Hung(kStart + absl::Seconds(30)));
}

TEST(ActivityTrackerTest, Observe_DiskWait_Active) {
  ActivityTracker t(TenSeconds());
  t.Observe(Sample(absl::Seconds(2)), kStart);
  for (int i = 1; i <= 30; ++i) {
    t.Observe(Sample(absl::Seconds(2), 0, /*disk_wait=*/true), kStart + absl::Seconds(i));
  }
  EXPECT_FALSE(t.Hung(kStart + absl::Seconds(30)));
}

TEST(ActivityTrackerTest, Observe_NeverWorked_NotJudged) {
  ActivityTracker t(TenSeconds());
  for (int i = 0; i <= 60; ++i) {
    t.Observe(Sample(absl::Milliseconds(20)), kStart + absl::Seconds(i));  // `sleep 600`
  }
  EXPECT_FALSE(t.judged());
  EXPECT_FALSE(t.Hung(kStart + absl::Seconds(60)));
}

TEST(ActivityTrackerTest, Observe_ZeroTimeout_NeverHung) {
  ActivityTracker::Options o;
  o.hang_timeout = absl::ZeroDuration();
  ActivityTracker t(o);
  t.Observe(Sample(absl::Seconds(5)), kStart);
  t.Observe(Sample(absl::Seconds(5)), kStart + absl::Hours(1));
  EXPECT_FALSE(t.Hung(kStart + absl::Hours(1)));
}

TEST(ActivityTrackerTest, Observe_GroupGone_TellsNothing) {
  ActivityTracker t(TenSeconds());
  t.Observe(Sample(absl::Seconds(5)), kStart);
  t.Observe(std::nullopt, kStart + absl::Seconds(5));
  EXPECT_EQ(*t.last_active(), kStart);
}

TEST(ActivityTrackerTest, Forgive_FrozenTime_NotCounted) {
  ActivityTracker t(TenSeconds());
  t.Observe(Sample(absl::Seconds(5)), kStart);
  t.Observe(Sample(absl::Seconds(5)), kStart + absl::Seconds(4));
  t.Forgive(absl::Seconds(20));  // frozen by the lease from 4 s to 24 s
  t.Observe(Sample(absl::Seconds(5)), kStart + absl::Seconds(25));
  EXPECT_EQ(t.IdleFor(kStart + absl::Seconds(25)), absl::Seconds(5));
  EXPECT_FALSE(t.Hung(kStart + absl::Seconds(25)));
  EXPECT_TRUE(t.Hung(kStart + absl::Seconds(31)));
}

TEST(DescribeIdlenessTest, OneDecimal) {
  EXPECT_EQ(DescribeIdleness(absl::Milliseconds(10440)), "no CPU or I/O for 10.4 s");
}

}  // namespace
}  // namespace ddp::client
