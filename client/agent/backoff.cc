#include "client/agent/backoff.h"

#include <algorithm>
#include <memory>
#include <random>

namespace ddp::client {

Backoff::Backoff(BackoffOptions options, RandomSource random)
    : options_(options), random_(std::move(random)) {
  options_.min_delay = std::max(options_.min_delay, absl::ZeroDuration());
  options_.max_delay = std::max(options_.max_delay, options_.min_delay);
  options_.multiplier = std::max(options_.multiplier, 1.0);
  if (!random_) {
    auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
    random_ = [engine] { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
  }
}

absl::Duration Backoff::NextDelay() {
  // Grow the ceiling step by step so a long outage never overflows.
  absl::Duration ceiling = options_.min_delay;
  for (int i = 0; i < failures_ && ceiling < options_.max_delay; ++i) {
    ceiling = ceiling * options_.multiplier;
    if (ceiling == absl::ZeroDuration()) break;
  }
  ceiling = std::min(ceiling, options_.max_delay);
  ++failures_;
  const double r = std::clamp(random_(), 0.0, 1.0);
  return options_.min_delay + (ceiling - options_.min_delay) * r;
}

}  // namespace ddp::client
