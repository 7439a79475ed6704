#ifndef DDP_COORDINATOR_KV_WATCH_HUB_H_
#define DDP_COORDINATOR_KV_WATCH_HUB_H_

// The watchers of the key-value store. Each watcher sees every event of its
// namespace whose key starts with its prefix, from its start revision on, in
// revision order, with no gap and no duplicate:
//   * history (start revision .. the revision published when it registered) is
//     read from the backend page by page ("catch-up");
//   * later events are queued by Publish while catch-up goes on.
//
// Publish is cheap per watcher: a commit's events are wrapped once in a shared
// PublishedEvents and each matching watcher's queue gets a reference to it (or
// to one shared copy per distinct subset, for watchers that match only part of
// the commit). Publish does not call the sinks itself: it returns the sinks of
// idle watchers that now have events, and the caller notifies them off the
// committer thread (KvStore's delivery thread), so sending to 1,000 watchers
// never holds up the next commit.
//
// Flow control is pull-based. The consumer calls Take until it returns an empty
// batch; after that the hub has WatchSink::OnReady called once when new events
// (or a cancellation) arrive, and the consumer calls Take again. What one Take
// hands over is bounded (max_events_per_take, max_take_bytes).
//
// Memory per watcher is bounded in bytes (issue 23: one watcher that never
// read grew the coordinator by 380 MB). A watcher whose queue would hold more
// than max_queued_bytes (or max_queued_events) drops its queue and goes back
// to catching up from the history, from the first event it has not taken, as
// etcd moves a slow watcher to its unsynced group: it holds no live events
// then, however far behind it is, and still gets every event once and in
// order when it reads again. If that history is compacted meanwhile, Take
// fails with OUT_OF_RANGE naming the revision to resume from.
//
// Watcher lifecycle:
//
//   Add --> catching-up --(history read)--> live --Remove--> gone
//                 \   ^                       / |
//                  \   +---- queue full ------+  |
//                   +--> cancelled <-------------+  compaction, CancelAll
//                        (Take returns the error)
//
// Thread-safety: thread-safe. Publish is called by one thread (the committer),
// in revision order. Take for one watcher must not run concurrently with
// itself. OnReady is called without hub locks held, possibly concurrently with
// Take; the sink is held by shared_ptr, so it may outlive Remove by one
// in-flight OnReady call.

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/kv/kv_backend.h"
#include "coordinator/kv/kv_ops.h"
#include "coordinator/kv/kv_types.h"
#include "coordinator/kv/published_events.h"

namespace ddp::kv {

using WatchId = int64_t;

class WatchSink {
 public:
  virtual ~WatchSink() = default;
  // New events or a cancellation are waiting: call WatchHub::Take. Must not
  // block.
  virtual void OnReady() = 0;
  // Sinks whose sends share one path (the gRPC adapter: one connection)
  // return the same non-zero value; the store notifies them one after
  // another (sink_notifier.h says why). 0: no group.
  virtual uint64_t SendGroup() const { return 0; }
};

struct WatchHubOptions {
  size_t max_watchers = 100'000;
  // A watcher whose undelivered live events would exceed either bound drops
  // them and catches up from the history instead. Bytes are counted as
  // PublishedEvents::approx_bytes (key, value, namespace and framing).
  size_t max_queued_events = 10'000;
  size_t max_queued_bytes = 4 << 20;
  // About this many events, and bytes, per Take: live events are cut only
  // between commits (a commit larger than this goes alone); history pages may
  // split a revision, and hold at most max_take_bytes (or one event).
  size_t max_events_per_take = 1000;
  size_t max_take_bytes = 1 << 20;
  // The largest event (KvStore sets it from its limits; 0: unknown). Sizes the
  // first history read so that even events this large stay near
  // max_take_bytes; later reads follow the sizes of the events read.
  size_t max_event_bytes = 0;
};

class WatchHub {
 public:
  // `history` must outlive the hub; it is read concurrently with the committer.
  WatchHub(KvBackend& history, WatchHubOptions options);

  // The revision already published when the hub starts (after a restart).
  void SetPublishedRevision(Revision revision);

  // Registers a watcher. start_revision 0 means "after the current published
  // revision". The caller has checked start_revision against the compacted
  // revision. Errors: RESOURCE_EXHAUSTED over max_watchers; UNAVAILABLE after
  // CancelAll.
  absl::StatusOr<WatchId> Add(const WatchRequest& request, std::shared_ptr<WatchSink> sink);

  // Next events for watcher `id` (possibly none). An empty batch always
  // leaves the watcher armed: OnReady follows its next event or its
  // cancellation, so a consumer may wait for it. A non-OK status is final
  // (cancelled: OUT_OF_RANGE, UNAVAILABLE, or the backend's error reading
  // history; NOT_FOUND for an unknown id).
  absl::Status Take(WatchId id, WatchBatch* batch);

  // Unregisters. An OnReady already under way may still run (hence the
  // shared_ptr).
  void Remove(WatchId id);

  // Queues the events of one committed batch, after which the store revision
  // is `revision`, for every matching watcher, and appends to `*to_notify` the
  // sinks to call OnReady on (outside any lock of the caller's that a sink's
  // Take would need).
  void Publish(std::vector<Event> events, Revision revision,
               std::vector<std::shared_ptr<WatchSink>>* to_notify);
  // The same, then calls OnReady on this thread.
  void Publish(std::vector<Event> events, Revision revision);

  // Cancels every watcher with `status` and refuses new ones.
  void CancelAll(const absl::Status& status);

  size_t size() const;
  Revision published_revision() const;

  // What watcher `id` holds now (tests; no metric reads it yet); zeros for an
  // unknown id.
  struct WatcherStats {
    size_t queued_events = 0;
    size_t queued_bytes = 0;
    bool catching_up = false;
    int64_t fell_behind = 0;  // times its queue was dropped for the history
  };
  WatcherStats Stats(WatchId id) const;

 private:
  struct Watcher {
    std::string ns;
    std::string prefix;
    Revision start_revision = 0;  // events below it are skipped
    std::shared_ptr<WatchSink> sink;
    // Catch-up cursor: next history read starts at catchup_revision, skipping
    // the first catchup_skip events of that revision (already delivered).
    bool catching_up = false;
    Revision catchup_revision = 0;
    size_t catchup_skip = 0;
    Revision catchup_end = 0;              // last revision served from history
    size_t history_page = 0;               // events to read for the next history page
    std::deque<PublishedEventsPtr> queue;  // live events, shared
    size_t queued_events = 0;              // events in `queue`
    size_t queued_bytes = 0;               // their approx_bytes
    int64_t fell_behind = 0;               // times `queue` was dropped
    bool armed = false;                    // consumer is idle: notify on the next event
    absl::Status status;                   // non-OK: cancelled
  };

  absl::Status TakeHistory(WatchId id, WatchBatch* batch) ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the front of w's live queue (w is not catching up) into `batch`;
  // arms w when there is nothing.
  void TakeQueueLocked(Watcher& w, WatchBatch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Cancels `w` and returns the sink to notify (null if none).
  std::shared_ptr<WatchSink> CancelLocked(Watcher& w, absl::Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends `chunk` to w's queue, or, when that would exceed the queue's
  // bounds, drops the queue and sends w back to the history.
  void EnqueueLocked(Watcher& w, PublishedEventsPtr chunk,
                     std::vector<std::shared_ptr<WatchSink>>* to_notify)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How many events of `event_bytes` each fill about max_take_bytes
  // (1..max_events_per_take; the most for 0 bytes).
  size_t EventsPerPage(size_t event_bytes) const;
  static bool Matches(const Watcher& w, const Event& event);

  KvBackend& history_;
  const WatchHubOptions options_;
  mutable absl::Mutex mu_;
  WatchId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  Revision published_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status closed_status_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<WatchId, Watcher> watchers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, absl::flat_hash_set<WatchId>> by_namespace_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_WATCH_HUB_H_
