#ifndef DDP_COORDINATOR_KV_TESTING_WATCH_TEST_UTIL_H_
#define DDP_COORDINATOR_KV_TESTING_WATCH_TEST_UTIL_H_

// Test helpers for watches: a sink that counts OnReady calls, and Drain, which
// pulls every event currently available.

#include <atomic>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/kv/kv_store.h"

namespace ddp::kv::testing {

class CountingSink : public WatchSink {
 public:
  void OnReady() override { ready_calls.fetch_add(1); }
  std::atomic<int> ready_calls{0};
};

// Takes batches until one comes back empty; appends events to `events`.
inline absl::Status Drain(KvStore& store, WatchId id, std::vector<Event>* events) {
  while (true) {
    WatchBatch batch;
    absl::Status status = store.TakeWatchEvents(id, &batch);
    if (!status.ok()) return status;
    if (batch.empty()) return absl::OkStatus();
    std::vector<Event> taken = batch.CopyEvents();
    events->insert(events->end(), taken.begin(), taken.end());
  }
}

}  // namespace ddp::kv::testing

#endif  // DDP_COORDINATOR_KV_TESTING_WATCH_TEST_UTIL_H_
