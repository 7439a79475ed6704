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
