#include "client/activity_tracker.h"

#include "absl/strings/str_format.h"

namespace ddp::client {

std::string DescribeIdleness(absl::Duration idle_for) {
  return absl::StrFormat("no CPU or I/O for %.1f s", absl::ToDoubleSeconds(idle_for));
}

void ActivityTracker::Observe(const std::optional<ProcessGroupSample>& sample, absl::Time now) {
  if (!sample.has_value()) return;
  if (sample->cpu >= options_.cpu_before_judged) judged_ = true;
  if (!last_sampled_.has_value()) {  // the baseline
    last_sampled_ = now;
    last_cpu_ = sample->cpu;
    last_io_bytes_ = sample->io_bytes;
    if (!last_active_.has_value()) last_active_ = now;
    return;
  }
  const absl::Duration elapsed = now - *last_sampled_;
  const bool busy =
      elapsed > absl::ZeroDuration() && sample->cpu - last_cpu_ > elapsed * options_.min_cpu_share;
  // A child reaped by the group's leader moves its counts into the leader's
  // (CPU: cutime; bytes: not at all), so the totals may shrink: only growth
  // is activity.
  const bool moved_bytes = sample->io_bytes > last_io_bytes_;
  if (busy || moved_bytes || sample->in_disk_wait) last_active_ = now;
  last_sampled_ = now;
  last_cpu_ = sample->cpu;
  last_io_bytes_ = sample->io_bytes;
}

absl::Duration ActivityTracker::IdleFor(absl::Time now) const {
  return last_active_.has_value() ? now - *last_active_ : absl::ZeroDuration();
}

bool ActivityTracker::Hung(absl::Time now) const {
  return options_.hang_timeout > absl::ZeroDuration() && judged_ &&
         IdleFor(now) > options_.hang_timeout;
}

void ActivityTracker::Forgive(absl::Duration paused) {
  if (last_active_.has_value() && paused > absl::ZeroDuration()) *last_active_ += paused;
  last_sampled_.reset();  // its counters did not move while frozen
}

}  // namespace ddp::client
