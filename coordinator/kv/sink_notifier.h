#ifndef DDP_COORDINATOR_KV_SINK_NOTIFIER_H_
#define DDP_COORDINATOR_KV_SINK_NOTIFIER_H_

// Runs one call per item of a list on several threads: the caller's plus
// `threads - 1` helpers ("kv-notify"), each taking the next item, and returns
// once every call has returned. The store's delivery thread uses it to tell
// watchers about a commit (WatchSink::OnReady) and to send a batch's replies.
//
// Why: each of those starts a gRPC write, which in gRPC 1.51 costs a socket
// write and a thread wake-up per stream when issued one after another. With a
// second thread, while one thread holds a connection's write lock (gRPC's
// combiner) the other's writes to that connection queue up behind it and
// leave in the same socket write, and both cores work: 1,000 watchers of one
// key were notified in 28 ms by one thread, in 9-13 ms by two. That happens
// only when both threads write to the same connection at the same moment, so
// NotifyAll orders the sinks by their SendGroup (their connection): the two
// threads take neighbouring items, i.e. streams of one connection.
//
// Thread-safety: ForEach is called by one thread at a time (the commit loop's
// delivery thread); `call` must be safe to
// run concurrently for different items.

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/kv/watch_hub.h"

namespace ddp::kv {

// The order in which NotifyAll hands `sinks` to its threads: indices into
// `sinks`, those of one SendGroup side by side, each group in list order.
std::vector<size_t> SendOrder(const std::vector<std::shared_ptr<WatchSink>>& sinks);

class SinkNotifier {
 public:
  // `threads` >= 1; lists shorter than `min_parallel` run on the calling
  // thread alone (waking a helper costs more than a few writes).
  SinkNotifier(int threads, size_t min_parallel);
  ~SinkNotifier();
  SinkNotifier(const SinkNotifier&) = delete;
  SinkNotifier& operator=(const SinkNotifier&) = delete;

  // call(i) for every i in [0, n), in no particular order across threads.
  void ForEach(size_t n, const std::function<void(size_t)>& call);
  // OnReady on every sink, the sinks of one SendGroup one after another.
  void NotifyAll(const std::vector<std::shared_ptr<WatchSink>>& sinks);

 private:
  // Runs the current list's calls not yet taken.
  void Drain();
  void HelperLoop();

  const size_t min_parallel_;
  absl::Mutex mu_;
  // The list being run; items are taken by index, first come first served,
  // so one slow call does not hold up the others.
  const std::function<void(size_t)>* call_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t size_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<size_t> next_{0};
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int busy_helpers_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> helpers_;
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_SINK_NOTIFIER_H_
