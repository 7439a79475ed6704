#include "common/clock.h"

namespace ddp {

const RealClock& RealClock::Get() {
  static const RealClock* const clock = new RealClock();
  return *clock;
}

}  // namespace ddp
