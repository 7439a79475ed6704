#include "coordinator/kv/sink_notifier.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

namespace ddp::kv {

SinkNotifier::SinkNotifier(int threads, size_t min_parallel)
    : min_parallel_(std::max<size_t>(min_parallel, 2)) {
  for (int i = 1; i < threads; ++i) {
    helpers_.emplace_back([this] { HelperLoop(); });
  }
}

SinkNotifier::~SinkNotifier() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& helper : helpers_) helper.join();
}

void SinkNotifier::NotifyAll(const std::vector<std::shared_ptr<WatchSink>>& sinks) {
  if (helpers_.empty() || sinks.size() < min_parallel_) {
    for (const std::shared_ptr<WatchSink>& sink : sinks) sink->OnReady();
    return;
  }
  const std::vector<size_t> order = SendOrder(sinks);
  ForEach(order.size(), [&sinks, &order](size_t i) { sinks[order[i]]->OnReady(); });
}

std::vector<size_t> SendOrder(const std::vector<std::shared_ptr<WatchSink>>& sinks) {
  // (group, index) pairs sorted: the sinks of one connection side by side,
  // in their original order.
  std::vector<std::pair<uint64_t, size_t>> keyed(sinks.size());
  for (size_t i = 0; i < sinks.size(); ++i) keyed[i] = {sinks[i]->SendGroup(), i};
  std::sort(keyed.begin(), keyed.end());
  std::vector<size_t> order(keyed.size());
  for (size_t i = 0; i < keyed.size(); ++i) order[i] = keyed[i].second;
  return order;
}

void SinkNotifier::ForEach(size_t n, const std::function<void(size_t)>& call) {
  if (helpers_.empty() || n < min_parallel_) {
    for (size_t i = 0; i < n; ++i) call(i);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    call_ = &call;
    size_ = n;
    next_.store(0, std::memory_order_relaxed);
    busy_helpers_ = static_cast<int>(helpers_.size());
    ++generation_;  // wakes the helpers
  }
  Drain();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* busy) { return *busy == 0; }, &busy_helpers_));
  call_ = nullptr;
}

void SinkNotifier::Drain() {
  const std::function<void(size_t)>* call = nullptr;
  size_t n = 0;
  {
    absl::MutexLock lock(&mu_);
    call = call_;
    n = size_;
  }
  while (true) {
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n) return;
    (*call)(i);
  }
}

void SinkNotifier::HelperLoop() {
  pthread_setname_np(pthread_self(), "kv-notify");
  uint64_t seen = 0;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const auto work = [this, &seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || generation_ != seen;
      };
      mu_.Await(absl::Condition(&work));
      if (stopping_) return;
      seen = generation_;
    }
    Drain();
    absl::MutexLock lock(&mu_);
    --busy_helpers_;
  }
}

}  // namespace ddp::kv
