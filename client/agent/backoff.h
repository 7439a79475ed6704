#ifndef DDP_CLIENT_AGENT_BACKOFF_H_
#define DDP_CLIENT_AGENT_BACKOFF_H_

// Exponential backoff with full jitter for reconnect loops:
//
//   ceiling(n) = min(max_delay, min_delay * multiplier^n)   (n = failures so
//   far) delay(n)   = min_delay + random() * (ceiling(n) - min_delay)
//
// so the first delay is exactly min_delay, later ones are spread uniformly up
// to a ceiling that grows geometrically and stops at max_delay. The random
// source is injected (uniform in [0, 1)) so tests are deterministic.
//
// Thread-safety: not thread-safe; one owner (one reconnect loop).

#include <functional>

#include "absl/time/time.h"

namespace ddp::client {

struct BackoffOptions {
  absl::Duration min_delay = absl::Milliseconds(100);
  absl::Duration max_delay = absl::Seconds(5);
  double multiplier = 2.0;  // >= 1
};

class Backoff {
 public:
  // Uniform in [0, 1); values outside are clamped.
  using RandomSource = std::function<double()>;

  // A null `random` uses a seeded std::mt19937_64. Options out of range are
  // repaired: negative delays become 0, max_delay < min_delay becomes
  // min_delay, multiplier < 1 becomes 1.
  explicit Backoff(BackoffOptions options, RandomSource random = nullptr);

  // The delay before the next attempt; counts one failure.
  absl::Duration NextDelay();
  // After a success: the next delay starts from min_delay again.
  void Reset() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  BackoffOptions options_;
  RandomSource random_;
  int failures_ = 0;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_BACKOFF_H_
