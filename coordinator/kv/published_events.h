#ifndef DDP_COORDINATOR_KV_PUBLISHED_EVENTS_H_
#define DDP_COORDINATOR_KV_PUBLISHED_EVENTS_H_

// The events of one commit as watchers receive them. The committer builds one
// PublishedEvents per commit (moving the commit's events in, no copy) and every
// watcher queue that matches the whole commit holds the same object; watchers
// that match only some events share one object per distinct subset. Immutable
// once built, so any number of threads read it without locks.
//
// Encoded() is a slot where the transport adapter keeps its wire form of
// exactly these events (the gRPC WatchResponse), built by the first watcher
// that sends it and reused by all the others: with 1,000 watchers on one key,
// a commit is converted to a proto once, not 1,000 times.
//
// Thread-safety: thread-safe (const after construction; Encoded is
// synchronized).

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/call_once.h"
#include "coordinator/kv/kv_types.h"

namespace ddp::kv {

class PublishedEvents {
 public:
  // `revision`: the store revision after the commit (>= every event's
  // revision). `events` in revision order.
  PublishedEvents(std::vector<Event> events, Revision revision);
  PublishedEvents(const PublishedEvents&) = delete;
  PublishedEvents& operator=(const PublishedEvents&) = delete;

  const std::vector<Event>& events() const { return events_; }
  size_t size() const { return events_.size(); }
  Revision revision() const { return revision_; }
  // About the encoded size of all events (key, value, namespace + framing).
  size_t approx_bytes() const { return approx_bytes_; }

  // The adapter's encoded form, made by `make` on the first call (exactly
  // once, even when called concurrently) and returned to every later caller.
  // One process has one adapter type T; every caller must use the same T.
  template <typename T, typename Make>
  std::shared_ptr<const T> Encoded(Make make) const {
    absl::call_once(encoded_once_, [&] {
      std::shared_ptr<const T> built = make(*this);
      encoded_ = std::move(built);
    });
    return std::static_pointer_cast<const T>(encoded_);
  }

  // The approx_bytes() estimate of one event: its strings plus this much
  // for the integer fields and protobuf tags, generously.
  static constexpr size_t kFixedEventBytes = 64;
  static size_t ApproxBytes(const Event& event);

 private:
  const std::vector<Event> events_;
  const Revision revision_;
  const size_t approx_bytes_;
  mutable absl::once_flag encoded_once_;
  mutable std::shared_ptr<const void> encoded_;
};

using PublishedEventsPtr = std::shared_ptr<const PublishedEvents>;

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_PUBLISHED_EVENTS_H_
