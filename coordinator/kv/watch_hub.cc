#include "coordinator/kv/watch_hub.h"

#include <utility>

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
    return absl::ResourceExhaustedError(
        absl::StrCat("too many watchers (limit ", options_.max_watchers,
                     "); close unused watches"));
  }
  const WatchId id = next_id_++;
  Watcher& w = watchers_[id];
  w.ns = request.ns;
  w.prefix = request.prefix;
  w.sink = std::move(sink);
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

absl::Status WatchHub::TakeHistory(WatchId id, WatchBatch* batch) {
  std::string ns, prefix;
  Revision from = 0, end = 0;
  size_t skip = 0;
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
  }
  // Read outside the lock: the backend allows this concurrently with Commit.
  const size_t want = options_.max_events_per_take + skip;
  absl::StatusOr<std::vector<Event>> read =
      history_.ReadEvents(ns, prefix, from, want);
  std::shared_ptr<WatchSink> to_notify;
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return absl::NotFoundError("watch was removed");
  Watcher& w = it->second;
  if (!w.status.ok()) return w.status;
  if (!read.ok()) {
    absl::Status status = read.status();
    if (absl::IsOutOfRange(status)) {
      status = absl::OutOfRangeError(
          absl::StrCat("watch history from revision ", from,
                       " was compacted while catching up; Range, then watch "
                       "from the Range's revision + 1 (",
                       status.message(), ")"));
    }
    CancelLocked(w, status);
    return status;
  }
  std::vector<Event>& events = *read;
  bool reached_end = events.size() < want;
  size_t same_revision_count = 0;
  Revision last_revision = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    Event& event = events[i];
    if (event.revision() > end) {
      reached_end = true;
      break;
    }
    if (event.revision() == last_revision) {
      ++same_revision_count;
    } else {
      last_revision = event.revision();
      same_revision_count = 1;
    }
    if (i >= skip) batch->events.push_back(std::move(event));
  }
  if (reached_end || last_revision == 0) {
    w.catching_up = false;
  } else {
    w.catchup_revision = last_revision;
    w.catchup_skip = same_revision_count;
  }
  batch->revision = published_;
  return absl::OkStatus();
}

absl::Status WatchHub::Take(WatchId id, WatchBatch* batch) {
  batch->events.clear();
  bool catching_up = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = watchers_.find(id);
    if (it == watchers_.end()) return absl::NotFoundError("watch was removed");
    if (!it->second.status.ok()) return it->second.status;
    catching_up = it->second.catching_up;
  }
  if (catching_up) {
    absl::Status status = TakeHistory(id, batch);
    if (!status.ok() || !batch->events.empty()) return status;
  }
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return absl::NotFoundError("watch was removed");
  Watcher& w = it->second;
  if (!w.status.ok()) return w.status;
  batch->revision = published_;
  if (w.catching_up)
    return absl::OkStatus();  // an empty history page; call again
  while (!w.queue.empty()) {
    const Revision revision = w.queue.front().revision();
    if (batch->events.size() >= options_.max_events_per_take &&
        batch->events.back().revision() != revision) {
      break;
    }
    batch->events.push_back(std::move(w.queue.front()));
    w.queue.pop_front();
  }
  w.armed = batch->events.empty();
  return absl::OkStatus();
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

std::shared_ptr<WatchSink> WatchHub::CancelLocked(Watcher& w,
                                                  absl::Status status) {
  if (!w.status.ok()) return nullptr;
  w.status = std::move(status);
  w.queue.clear();
  w.catching_up = false;
  return w.sink;
}

void WatchHub::Publish(const std::vector<Event>& events, Revision revision) {
  std::vector<std::shared_ptr<WatchSink>> to_notify;
  {
    absl::MutexLock lock(&mu_);
    published_ = revision;
    absl::flat_hash_map<WatchId, std::vector<const Event*>> matched;
    for (const Event& event : events) {
      auto ns_it = by_namespace_.find(event.kv.ns);
      if (ns_it == by_namespace_.end()) continue;
      for (WatchId id : ns_it->second) {
        const Watcher& w = watchers_.at(id);
        if (w.status.ok() && Matches(w, event)) matched[id].push_back(&event);
      }
    }
    for (auto& [id, list] : matched) {
      Watcher& w = watchers_.at(id);
      if (!w.queue.empty() &&
          w.queue.size() + list.size() > options_.max_queued_events) {
        const Revision resume =
            w.catching_up ? w.catchup_revision : w.queue.front().revision();
        auto sink = CancelLocked(
            w,
            absl::ResourceExhaustedError(absl::StrCat(
                "watcher fell more than ", options_.max_queued_events,
                " events behind; watch again with start_revision=", resume)));
        if (sink) to_notify.push_back(std::move(sink));
        continue;
      }
      for (const Event* event : list) w.queue.push_back(*event);
      if (w.armed) {
        w.armed = false;
        to_notify.push_back(w.sink);
      }
    }
  }
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

Revision WatchHub::published_revision() const {
  absl::MutexLock lock(&mu_);
  return published_;
}

}  // namespace ddp::kv
