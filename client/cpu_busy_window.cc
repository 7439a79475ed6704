#include "client/cpu_busy_window.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace ddp::client {

void CpuBusyWindow::Observe(absl::Duration group_cpu, absl::Time now) {
  if (!samples_.empty() && (group_cpu < samples_.back().second || now <= samples_.back().first)) {
    samples_.clear();
  }
  samples_.emplace_back(now, group_cpu);
  // Keep the newest sample at or before the window's start: the measurement
  // spans at least the whole window (and at most one sample interval more).
  const absl::Time start = now - options_.window;
  while (samples_.size() >= 2 && samples_[1].first <= start) samples_.pop_front();
  if (samples_.size() < 2 || samples_.front().first > start) return;
  const auto& [since, cpu_then] = samples_.front();
  const double measured = 1000 * absl::FDivDuration(group_cpu - cpu_then, now - since);
  const int permille = std::max(1, static_cast<int>(std::lround(measured)));
  const int change = std::abs(permille - reported_permille_);
  if (reported_permille_ == 0 || (change > options_.min_change_permille &&
                                  change > options_.min_change_share * reported_permille_)) {
    reported_permille_ = permille;
  }
}

}  // namespace ddp::client
