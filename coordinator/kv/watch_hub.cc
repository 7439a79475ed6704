#include "coordinator/kv/watch_hub.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ddp::kv {

WatchHub::WatchHub(KvBackend& history, WatchHubOptions options)
    : history_(history), options_(options) {}

void WatchHub::SetPublishedRevision(Revision revision) {
  absl::MutexLock lock(&mu_);
  published_ = revision;
}

bool WatchHub::Matches(const Watcher& w, const Event& event) {
  return event.revision() >= w.start_revision && event.kv.ns == w.ns &&
         absl::StartsWith(event.kv.key, w.prefix);
}

absl::StatusOr<WatchId> WatchHub::Add(const WatchRequest& request,
                                      std::shared_ptr<WatchSink> sink) {
  absl::MutexLock lock(&mu_);
  if (closed_) return closed_status_;
  if (watchers_.size() >= options_.max_watchers) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many watchers (limit ", options_.max_watchers, "); close unused watches"));
  }
  const WatchId id = next_id_++;
  Watcher& w = watchers_[id];
  w.ns = request.ns;
  w.prefix = request.prefix;
  w.sink = std::move(sink);
  // The first history read assumes events as large as they may be.
  w.history_page = EventsPerPage(options_.max_event_bytes);
  if (request.start_revision == 0) {
    w.start_revision = published_ + 1;
  } else {
    w.start_revision = request.start_revision;
    if (request.start_revision <= published_) {
      // Everything up to published_ is durable in the backend; later events
      // arrive through Publish into the queue.
      w.catching_up = true;
      w.catchup_revision = request.start_revision;
      w.catchup_end = published_;
    }
  }
  by_namespace_[w.ns].insert(id);
  return id;
}

size_t WatchHub::EventsPerPage(size_t event_bytes) const {
  const size_t most = std::max<size_t>(1, options_.max_events_per_take);
  if (event_bytes == 0) return most;
  return std::clamp<size_t>(options_.max_take_bytes / event_bytes, 1, most);
}

absl::Status WatchHub::TakeHistory(WatchId id, WatchBatch* batch) {
  std::string ns, prefix;
  Revision from = 0, end = 0;
  size_t skip = 0, page_events = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = watchers_.find(id);
    if (it == watchers_.end()) return absl::NotFoundError("watch was removed");
    const Watcher& w = it->second;
    ns = w.ns;
    prefix = w.prefix;
    from = w.catchup_revision;
    skip = w.catchup_skip;
    end = w.catchup_end;
    page_events = w.history_page;
  }
  // Read outside the lock: the backend allows this concurrently with Commit.
  // One event more than the page is read to see whether the page's last
  // revision goes on (WatchBatch::complete_through).
  const size_t want = page_events + skip;
  absl::StatusOr<std::vector<Event>> read = history_.ReadEvents(ns, prefix, from, want + 1);
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return absl::NotFoundError("watch was removed");
  Watcher& w = it->second;
  if (!w.status.ok()) return w.status;
  if (!read.ok()) {
    absl::Status status = read.status();
    if (absl::IsOutOfRange(status)) {
      status =
          absl::OutOfRangeError(absl::StrCat("watch history from revision ", from,
                                             " was compacted while catching up; Range, then watch "
                                             "from the Range's revision + 1 (",
                                             status.message(), ")"));
    }
    CancelLocked(w, status);
    return status;
  }
  std::vector<Event>& events = *read;
  // The event after the page, if it is known.
  const Event* next = events.size() > want ? &events[want] : nullptr;
  // The watcher's queue may have overflowed during the read, moving the end
  // on: a short read then says nothing about the new end.
  const Revision end_now = w.catchup_end;
  bool reached_end = events.size() <= want && end_now == end;
  size_t same_revision_count = 0;
  Revision last_revision = 0;
  std::vector<Event> page;
  size_t page_bytes = 0;
  for (size_t i = 0; i < std::min(events.size(), want); ++i) {
    Event& event = events[i];
    if (event.revision() > end_now) {
      reached_end = true;
      next = &event;
      break;
    }
    const size_t bytes = PublishedEvents::ApproxBytes(event);
    if (i >= skip && !page.empty() && page_bytes + bytes > options_.max_take_bytes) {
      reached_end = false;  // the rest is read again next time
      next = &event;
      break;
    }
    if (event.revision() == last_revision) {
      ++same_revision_count;
    } else {
      last_revision = event.revision();
      same_revision_count = 1;
    }
    if (i >= skip) {
      page_bytes += bytes;
      page.push_back(std::move(event));
    }
  }
  if (reached_end) {
    w.catching_up = false;
  } else if (last_revision != 0) {
    w.catchup_revision = last_revision;
    w.catchup_skip = same_revision_count;
  }  // else nothing read, and the end moved: read again
  if (!page.empty()) {
    // The next page holds about max_take_bytes of events of this size.
    w.history_page = EventsPerPage(page_bytes / page.size());
  }
  batch->revision = published_;
  if (!page.empty()) {
    // A page cut inside a revision leaves the rest of it for the next page.
    const bool revision_goes_on = next != nullptr && next->revision() == last_revision;
    batch->complete_through = revision_goes_on ? last_revision - 1 : last_revision;
    batch->chunks.push_back(std::make_shared<const PublishedEvents>(std::move(page), published_));
  }
  return absl::OkStatus();
}

absl::Status WatchHub::Take(WatchId id, WatchBatch* batch) {
  batch->chunks.clear();
  // History pages until one has events or catch-up ends, then the queue. The
  // look at the catch-up state and the take from the queue (and arming the
  // watcher when it is empty) are one critical section: a commit that
  // overflows the queue in between sends the watcher back to the history,
  // and an empty batch taken then, unarmed, would leave a consumer waiting
  // for an OnReady that never comes (issue 23, point 7: a watch silent with
  // no error). An empty page that does not end catch-up happens only when the
  // watcher's queue overflowed during the read (its matching events are then
  // in the history): the next read finds them.
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto it = watchers_.find(id);
      if (it == watchers_.end()) return absl::NotFoundError("watch was removed");
      Watcher& w = it->second;
      if (!w.status.ok()) return w.status;
      if (!w.catching_up) {
        TakeQueueLocked(w, batch);
        return absl::OkStatus();
      }
    }
    absl::Status status = TakeHistory(id, batch);
    if (!status.ok() || !batch->chunks.empty()) return status;
  }
}

void WatchHub::TakeQueueLocked(Watcher& w, WatchBatch* batch) {
  batch->revision = published_;
  // Chunks are whole commits, so cutting between them cuts between revisions.
  size_t taken = 0, taken_bytes = 0;
  while (!w.queue.empty()) {
    const PublishedEvents& front = *w.queue.front();
    if (taken > 0 && (taken + front.size() > options_.max_events_per_take ||
                      taken_bytes + front.approx_bytes() > options_.max_take_bytes)) {
      break;
    }
    taken += front.size();
    taken_bytes += front.approx_bytes();
    w.queued_events -= front.size();
    w.queued_bytes -= front.approx_bytes();
    batch->chunks.push_back(std::move(w.queue.front()));
    w.queue.pop_front();
  }
  // Nothing to send: the next event (or a cancellation) calls OnReady.
  w.armed = batch->chunks.empty();
  // Live chunks are whole commits (of the events w matches).
  batch->complete_through = w.armed ? published_ : batch->chunks.back()->revision();
}

void WatchHub::Remove(WatchId id) {
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  auto ns_it = by_namespace_.find(it->second.ns);
  if (ns_it != by_namespace_.end()) {
    ns_it->second.erase(id);
    if (ns_it->second.empty()) by_namespace_.erase(ns_it);
  }
  watchers_.erase(it);
}

std::shared_ptr<WatchSink> WatchHub::CancelLocked(Watcher& w, absl::Status status) {
  if (!w.status.ok()) return nullptr;
  w.status = std::move(status);
  w.queue.clear();
  w.queued_events = 0;
  w.queued_bytes = 0;
  w.catching_up = false;
  return w.sink;
}

void WatchHub::EnqueueLocked(Watcher& w, PublishedEventsPtr chunk,
                             std::vector<std::shared_ptr<WatchSink>>* to_notify) {
  const bool over = w.queued_events + chunk->size() > options_.max_queued_events ||
                    w.queued_bytes + chunk->approx_bytes() > options_.max_queued_bytes;
  // An idle consumer takes even an oversized commit at once; anyone else
  // holds nothing more and reads the history when it comes back.
  if (over && !(w.queue.empty() && w.armed)) {
    if (!w.catching_up) {
      const PublishedEvents& first = w.queue.empty() ? *chunk : *w.queue.front();
      w.catching_up = true;
      w.catchup_revision = first.events().front().revision();
      w.catchup_skip = 0;
    }
    // Everything published so far is durable in the history.
    w.catchup_end = chunk->revision();
    w.queue.clear();
    w.queued_events = 0;
    w.queued_bytes = 0;
    ++w.fell_behind;
    return;
  }
  w.queued_events += chunk->size();
  w.queued_bytes += chunk->approx_bytes();
  w.queue.push_back(std::move(chunk));
  if (w.armed) {
    w.armed = false;
    to_notify->push_back(w.sink);
  }
}

void WatchHub::Publish(std::vector<Event> events, Revision revision,
                       std::vector<std::shared_ptr<WatchSink>>* to_notify) {
  absl::MutexLock lock(&mu_);
  published_ = revision;
  if (by_namespace_.empty() || events.empty()) return;
  // The namespaces this commit touched, in order (nearly always one).
  absl::InlinedVector<std::string, 2> namespaces;
  for (const Event& event : events) {
    if (std::find(namespaces.begin(), namespaces.end(), event.kv.ns) == namespaces.end()) {
      namespaces.push_back(event.kv.ns);
    }
  }
  const auto all = std::make_shared<const PublishedEvents>(std::move(events), revision);
  const std::vector<Event>& published = all->events();
  // Watchers that match the same part of the commit share one copy of it.
  absl::flat_hash_map<std::vector<uint32_t>, PublishedEventsPtr> subsets;
  std::vector<uint32_t> matched;
  for (const std::string& ns : namespaces) {
    auto ns_it = by_namespace_.find(ns);
    if (ns_it == by_namespace_.end()) continue;
    for (WatchId id : ns_it->second) {
      Watcher& w = watchers_.at(id);
      if (!w.status.ok()) continue;
      matched.clear();
      for (uint32_t i = 0; i < published.size(); ++i) {
        if (Matches(w, published[i])) matched.push_back(i);
      }
      if (matched.empty()) continue;
      if (matched.size() == published.size()) {
        EnqueueLocked(w, all, to_notify);
        continue;
      }
      PublishedEventsPtr& subset = subsets[matched];
      if (subset == nullptr) {
        std::vector<Event> part;
        part.reserve(matched.size());
        for (uint32_t i : matched) part.push_back(published[i]);
        subset = std::make_shared<const PublishedEvents>(std::move(part), revision);
      }
      EnqueueLocked(w, subset, to_notify);
    }
  }
}

void WatchHub::Publish(std::vector<Event> events, Revision revision) {
  std::vector<std::shared_ptr<WatchSink>> to_notify;
  Publish(std::move(events), revision, &to_notify);
  for (auto& sink : to_notify) sink->OnReady();
}

void WatchHub::CancelAll(const absl::Status& status) {
  std::vector<std::shared_ptr<WatchSink>> to_notify;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    closed_status_ = status;
    for (auto& [id, w] : watchers_) {
      auto sink = CancelLocked(w, status);
      if (sink) to_notify.push_back(std::move(sink));
    }
  }
  for (auto& sink : to_notify) sink->OnReady();
}

size_t WatchHub::size() const {
  absl::MutexLock lock(&mu_);
  return watchers_.size();
}

WatchHub::WatcherStats WatchHub::Stats(WatchId id) const {
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return {};
  const Watcher& w = it->second;
  return WatcherStats{w.queued_events, w.queued_bytes, w.catching_up, w.fell_behind};
}

Revision WatchHub::published_revision() const {
  absl::MutexLock lock(&mu_);
  return published_;
}

}  // namespace ddp::kv
