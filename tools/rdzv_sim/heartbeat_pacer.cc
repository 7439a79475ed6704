#include "tools/rdzv_sim/heartbeat_pacer.h"

#include <algorithm>

namespace ddp::rdzv_sim {

HeartbeatPacer::HeartbeatPacer(int agents, absl::Duration interval, absl::Time start)
    : agents_(std::max(agents, 1)),
      interval_(interval > absl::ZeroDuration() ? interval : absl::Milliseconds(1)),
      start_(start) {}

void HeartbeatPacer::TakeDue(absl::Time now, std::vector<int>* due) {
  if (now <= start_) return;
  // Exact integer arithmetic: whole rounds, then the share of the partial one.
  const int64_t elapsed = absl::ToInt64Nanoseconds(now - start_);
  const int64_t period = absl::ToInt64Nanoseconds(interval_);
  const int64_t owed = elapsed / period * agents_ + elapsed % period * agents_ / period;
  int64_t count = owed - taken_;
  if (count <= 0) return;
  if (count > agents_) {  // drop a backlog beyond one round
    skipped_ += count - agents_;
    count = agents_;
  }
  for (int64_t i = 0; i < count; ++i) {
    due->push_back(next_);
    next_ = (next_ + 1) % agents_;
  }
  taken_ = owed;
}

}  // namespace ddp::rdzv_sim
