#include "client/heartbeat_tracker.h"

#include "absl/strings/str_format.h"

namespace ddp::client {

std::string DescribeSilence(absl::Duration silent_for) {
  return absl::StrFormat("no heartbeat for %.1f s", absl::ToDoubleSeconds(silent_for));
}

bool HeartbeatTracker::Observe(std::optional<absl::Time> mtime, absl::Time now) {
  if (mtime && mtime != last_mtime_) {
    last_mtime_ = mtime;
    last_touch_ = now;
  }
  if (timeout_ <= absl::ZeroDuration() || !last_touch_) return false;
  return now - *last_touch_ > timeout_;
}

void HeartbeatTracker::Forgive(absl::Duration paused) {
  if (last_touch_ && paused > absl::ZeroDuration()) *last_touch_ += paused;
}

absl::Duration HeartbeatTracker::SilentFor(absl::Time now) const {
  return last_touch_ ? now - *last_touch_ : absl::ZeroDuration();
}

}  // namespace ddp::client
