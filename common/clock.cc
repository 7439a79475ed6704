#include "common/clock.h"

#include <time.h>

namespace ddp {

const RealClock& RealClock::Get() {
  static const RealClock* const clock = new RealClock();
  return *clock;
}

absl::Time MonotonicClock::Now() const {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return absl::UnixEpoch() + absl::DurationFromTimespec(now);
}

const MonotonicClock& MonotonicClock::Get() {
  static const MonotonicClock* const clock = new MonotonicClock();
  return *clock;
}

const SteadyWallClock& SteadyWallClock::Get() {
  static const SteadyWallClock* const clock =
      new SteadyWallClock(RealClock::Get(), MonotonicClock::Get());
  return *clock;
}

}  // namespace ddp
