#ifndef DDP_COMMON_CLOCK_H_
#define DDP_COMMON_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ddp {

// Time source injected into every component that has timeouts, so tests drive time
// by hand instead of sleeping. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The wall clock. Stateless; one shared instance is fine.
class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  static const RealClock& Get();
};

// CLOCK_MONOTONIC as an absl::Time (the Unix epoch plus the time since boot): never steps
// with the wall clock, and is the same clock across the processes of a host (Python's
// time.monotonic() on Linux). For deadlines that must not move when NTP sets the time.
class MonotonicClock final : public Clock {
 public:
  absl::Time Now() const override;
  static const MonotonicClock& Get();
};

// Wall-clock time that never steps: the wall clock read once, at
// construction, advanced by a monotonic clock since. Timestamps read like the
// wall clock's (to within corrections NTP makes later), and deadlines counted
// on it do not jump when someone sets the time (a forward step would otherwise
// make every heartbeat look late at once). The coordinator's jobs and KV
// leases run on it.
class SteadyWallClock final : public Clock {
 public:
  // Both must outlive the clock (tests pass fakes).
  SteadyWallClock(const Clock& wall, const Clock& monotonic)
      : monotonic_(monotonic), wall_at_start_(wall.Now()), monotonic_at_start_(monotonic.Now()) {}
  absl::Time Now() const override {
    return wall_at_start_ + (monotonic_.Now() - monotonic_at_start_);
  }
  // Over RealClock and MonotonicClock, anchored at its first use.
  static const SteadyWallClock& Get();

 private:
  const Clock& monotonic_;
  const absl::Time wall_at_start_;
  const absl::Time monotonic_at_start_;
};

// A clock that moves only when a test says so. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp

#endif  // DDP_COMMON_CLOCK_H_
