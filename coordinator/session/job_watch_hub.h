#ifndef DDP_COORDINATOR_SESSION_JOB_WATCH_HUB_H_
#define DDP_COORDINATOR_SESSION_JOB_WATCH_HUB_H_

// Fans the rendezvous core's job events out to WatchJob subscribers. Each
// subscriber has a bounded queue: the delivery thread appends, the subscriber takes
// when it is ready to write. A subscriber whose queue is full is cut off (its
// next Take returns RESOURCE_EXHAUSTED naming the index to watch again from),
// so a slow watcher never makes the coordinator buffer without limit.
//
// Listener protocol: OnReady() is called (without the hub's lock) when a
// subscriber's queue went from empty to non-empty or the subscription ended;
// the subscriber then calls Take until it returns no events.
//
// Thread-safety: thread-safe.

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/rendezvous/job_types.h"

namespace ddp::session {

struct JobWatchHubOptions {
  int max_watchers = 1024;       // all jobs together
  int max_queued_events = 1024;  // per watcher
};

class JobEventListener {
 public:
  virtual ~JobEventListener() = default;
  virtual void OnReady() = 0;
};

class JobWatchHub {
 public:
  using WatchId = uint64_t;

  explicit JobWatchHub(JobWatchHubOptions options) : options_(options) {}

  // Subscribes to every event of `job_id` published from now on.
  // Possible errors: RESOURCE_EXHAUSTED (max_watchers), UNAVAILABLE (shut
  // down).
  absl::StatusOr<WatchId> Watch(const std::string& job_id,
                                std::shared_ptr<JobEventListener> listener);
  // Moves the queued events into `events` (appending). Possible errors:
  // RESOURCE_EXHAUSTED (the watcher fell behind and was cut off), UNAVAILABLE
  // (shut down), NOT_FOUND (unknown id).
  absl::Status Take(WatchId id, std::vector<rendezvous::JobEvent>* events);
  void Cancel(WatchId id);

  // Called by the commit loop's delivery thread with each batch of the core's events.
  void Publish(const std::vector<rendezvous::JobEvent>& events);
  // Ends every subscription with UNAVAILABLE; later Watch calls fail.
  void Shutdown();

  int watcher_count() const;

 private:
  struct Watcher {
    std::string job_id;
    std::shared_ptr<JobEventListener> listener;
    std::deque<rendezvous::JobEvent> queue;
    absl::Status ended;  // non-OK once cut off or shut down
  };

  const JobWatchHubOptions options_;
  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  WatchId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<WatchId, Watcher> watchers_ ABSL_GUARDED_BY(mu_);
  // Watch ids by job, so Publish touches only the job's watchers.
  absl::flat_hash_map<std::string, std::vector<WatchId>> by_job_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_JOB_WATCH_HUB_H_
