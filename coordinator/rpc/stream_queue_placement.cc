#include "coordinator/rpc/stream_queue_placement.h"

#include <algorithm>

namespace ddp::rpc {

StreamQueuePlacement::StreamQueuePlacement(StreamQueuePlacementOptions options)
    : min_queues_(std::max(1, options.min_queues)),
      streams_per_queue_(std::max(0, options.streams_per_queue)),
      calls_per_queue_(static_cast<int64_t>(streams_per_queue_) +
                       std::max(0, options.accepts_per_queue)),
      max_queues_(streams_per_queue_ == 0 ? min_queues_
                                          : std::max(min_queues_, options.max_queues)),
      calls_(static_cast<size_t>(max_queues_), 0) {}

int StreamQueuePlacement::OpenQueues(int64_t calls) const {
  if (streams_per_queue_ == 0) return min_queues_;
  int open = min_queues_;
  while (open < max_queues_ && open * calls_per_queue_ < calls) {
    open = std::min(max_queues_, 2 * open);
  }
  return open;
}

int StreamQueuePlacement::Add(int preferred) {
  absl::MutexLock lock(&mu_);
  const int open = OpenQueues(total_ + 1);
  if (preferred >= 0 && preferred < open &&
      (streams_per_queue_ == 0 || calls_[preferred] < calls_per_queue_)) {
    ++calls_[preferred];
    ++total_;
    return preferred;
  }
  int best = 0;
  for (int i = 1; i < open; ++i) {
    if (calls_[i] < calls_[best]) best = i;
  }
  ++calls_[best];
  ++total_;
  return best;
}

void StreamQueuePlacement::Remove(int queue) {
  absl::MutexLock lock(&mu_);
  if (queue < 0 || queue >= max_queues_ || calls_[queue] == 0) return;
  --calls_[queue];
  --total_;
}

int64_t StreamQueuePlacement::calls(int queue) const {
  absl::MutexLock lock(&mu_);
  if (queue < 0 || queue >= max_queues_) return 0;
  return calls_[queue];
}

int64_t StreamQueuePlacement::total_calls() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

}  // namespace ddp::rpc
