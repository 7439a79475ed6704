#include "client/cpu_busy_window.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>

namespace ddp::client {

bool CpuBusyWindow::JumpedSince(size_t index, absl::Duration group_cpu, absl::Time now) const {
  const auto& [then, cpu_then] = samples_[index];
  const double before =
      1000 * absl::FDivDuration(cpu_then - samples_.front().second, then - samples_.front().first);
  const double since = 1000 * absl::FDivDuration(group_cpu - cpu_then, now - then);
  return std::max(before, since) > options_.max_step_ratio * std::min(before, since) &&
         std::abs(before - since) > options_.min_change_permille;
}

void CpuBusyWindow::Observe(absl::Duration group_cpu, absl::Time now) {
  if (!samples_.empty() && (group_cpu < samples_.back().second || now <= samples_.back().first)) {
    samples_.clear();
  }
  // A share over the last two sample intervals more than twice or less than
  // half that of the samples before (the end of the start's `import torch`, a
  // new phase; one interval alone may hold a step more or less) starts the
  // window again there, and withdraws the value reported: what came before
  // says nothing of what comes now. A jump over the last interval alone holds
  // the report back until the next sample tells which it is.
  const bool jumped = samples_.size() >= 2 && JumpedSince(samples_.size() - 1, group_cpu, now);
  if (samples_.size() >= 3 && JumpedSince(samples_.size() - 2, group_cpu, now)) {
    samples_.erase(samples_.begin(), std::prev(samples_.end(), 2));
    reported_permille_ = 0;
  }
  samples_.emplace_back(now, group_cpu);
  // Keep the newest sample at or before the window's start: the measurement
  // spans at least the whole window (and at most one sample interval more).
  const absl::Time start = now - options_.window;
  while (samples_.size() >= 2 && samples_[1].first <= start) samples_.pop_front();
  if (jumped || samples_.size() < 2 || samples_.front().first > start) return;
  const auto& [since, cpu_then] = samples_.front();
  const double measured = 1000 * absl::FDivDuration(group_cpu - cpu_then, now - since);
  // The window's older and newer halves (split at the newest sample at or
  // before its middle) must agree.
  auto middle = samples_.begin();
  while (std::next(middle) != samples_.end() &&
         std::next(middle)->first <= now - options_.window / 2) {
    ++middle;
  }
  if (middle != samples_.begin()) {
    const double older =
        1000 * absl::FDivDuration(middle->second - cpu_then, middle->first - since);
    const double newer = 1000 * absl::FDivDuration(group_cpu - middle->second, now - middle->first);
    if (std::abs(older - newer) >
        std::max<double>(options_.min_change_permille,
                         options_.max_halves_difference * std::max(older, newer))) {
      return;
    }
  }
  const int permille = std::max(1, static_cast<int>(std::lround(measured)));
  const int change = std::abs(permille - reported_permille_);
  if (reported_permille_ == 0 || (change > options_.min_change_permille &&
                                  change > options_.min_change_share * reported_permille_)) {
    reported_permille_ = permille;
  }
}

}  // namespace ddp::client
