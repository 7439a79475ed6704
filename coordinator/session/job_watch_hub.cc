#include "coordinator/session/job_watch_hub.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp::session {

absl::StatusOr<JobWatchHub::WatchId> JobWatchHub::Watch(
    const std::string& job_id, std::shared_ptr<JobEventListener> listener) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) {
    return absl::UnavailableError("the coordinator is shutting down");
  }
  if (static_cast<int>(watchers_.size()) >= options_.max_watchers) {
    return absl::ResourceExhaustedError(absl::StrCat("the coordinator already serves ",
                                                     watchers_.size(),
                                                     " job watchers, the limit; retry later"));
  }
  WatchId id = next_id_++;
  Watcher& w = watchers_[id];
  w.job_id = job_id;
  w.listener = std::move(listener);
  by_job_[job_id].push_back(id);
  return id;
}

absl::Status JobWatchHub::Take(WatchId id, std::vector<rendezvous::JobEvent>* events) {
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) {
    return absl::NotFoundError(absl::StrCat("no job watcher ", id));
  }
  Watcher& w = it->second;
  for (auto& e : w.queue) events->push_back(std::move(e));
  w.queue.clear();
  return w.ended;
}

void JobWatchHub::Cancel(WatchId id) {
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  auto job = by_job_.find(it->second.job_id);
  if (job != by_job_.end()) {
    auto& ids = job->second;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
    if (ids.empty()) by_job_.erase(job);
  }
  watchers_.erase(it);
}

void JobWatchHub::Publish(const std::vector<rendezvous::JobEvent>& events) {
  std::vector<std::shared_ptr<JobEventListener>> ready;
  {
    absl::MutexLock lock(&mu_);
    for (const rendezvous::JobEvent& event : events) {
      auto job = by_job_.find(event.job_id());
      if (job == by_job_.end()) continue;
      for (WatchId id : job->second) {
        Watcher& w = watchers_[id];
        if (!w.ended.ok()) continue;
        if (static_cast<int>(w.queue.size()) >= options_.max_queued_events) {
          const int64_t resume = w.queue.front().index();
          w.queue.clear();
          w.ended = absl::ResourceExhaustedError(
              absl::StrCat("job watcher fell behind by more than ", options_.max_queued_events,
                           " events; watch again from index ", resume));
          ready.push_back(w.listener);
          continue;
        }
        if (w.queue.empty()) ready.push_back(w.listener);
        w.queue.push_back(event);
      }
    }
  }
  for (const auto& listener : ready) listener->OnReady();
}

void JobWatchHub::Shutdown() {
  std::vector<std::shared_ptr<JobEventListener>> ready;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    for (auto& [id, w] : watchers_) {
      if (!w.ended.ok()) continue;
      w.ended = absl::UnavailableError("the coordinator is shutting down");
      ready.push_back(w.listener);
    }
  }
  for (const auto& listener : ready) listener->OnReady();
}

int JobWatchHub::watcher_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(watchers_.size());
}

}  // namespace ddp::session
