#ifndef DDP_CLIENT_HEARTBEAT_TRACKER_H_
#define DDP_CLIENT_HEARTBEAT_TRACKER_H_

// Decides whether a worker hangs, from successive observations of its heartbeat
// file's modification time. The file's mtime is only compared with its previous
// value (so a FakeClock in tests and clock skew on shared file systems do not
// matter): a change counts as a touch at the observing clock's Now(). Before
// the first touch a worker is never hung (slow start-up, or a script that does
// not know about the file); after it, more than `timeout` without a new touch
// is a hang. A zero timeout disables the check.
//
// Thread-safety: not thread-safe; owned by the supervisor's event loop.

#include <optional>
#include <string>

#include "absl/time/time.h"

namespace ddp::client {

// "no heartbeat for 5.0 s": how long a hung worker was silent, in the words
// of every failure report and summary.
std::string DescribeSilence(absl::Duration silent_for);

class HeartbeatTracker {
 public:
  explicit HeartbeatTracker(absl::Duration timeout) : timeout_(timeout) {}

  // `mtime` is the file's modification time, or nullopt when the file does not
  // exist. Returns true when the worker is hung as of `now`.
  bool Observe(std::optional<absl::Time> mtime, absl::Time now);

  bool touched() const { return last_touch_.has_value(); }
  // When the last touch was observed (the clock's time), and the file's
  // modification time then. Both unset before the first touch.
  std::optional<absl::Time> last_touch() const { return last_touch_; }
  std::optional<absl::Time> last_mtime() const { return last_mtime_; }
  // Time since the last observed touch (zero before the first one).
  absl::Duration SilentFor(absl::Time now) const;
  // The worker was frozen (SIGSTOP by the agent's lease) for `paused`: a
  // silence it did not choose. The last touch moves that much later.
  void Forgive(absl::Duration paused);

 private:
  absl::Duration timeout_;
  std::optional<absl::Time> last_mtime_;
  std::optional<absl::Time> last_touch_;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_HEARTBEAT_TRACKER_H_
