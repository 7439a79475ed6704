#ifndef DDP_COORDINATOR_COMMIT_TESTING_KV_STORE_WITH_LOOP_H_
#define DDP_COORDINATOR_COMMIT_TESTING_KV_STORE_WITH_LOOP_H_

// A KvStore with a commit loop of its own over one KV backend, for tests,
// fuzzers and tools: the coordinator's own path (a StateStore over the backend,
// the CommitLoop with its commit, delivery and ticker threads, OpenKvStore),
// without jobs. Destruction shuts the store, then the loop, down.

#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "coordinator/commit/commit_loop.h"
#include "coordinator/commit/kv_participant.h"
#include "coordinator/commit/testing/split_state_store.h"
#include "coordinator/kv/kv_backend.h"
#include "coordinator/kv/kv_store.h"

namespace ddp::commit {

// Holds the store like a pointer: store->Put(...), *store, store.get(),
// store.reset() (shuts down and destroys store and loop).
class KvStoreWithLoop {
 public:
  // `tick_interval`: the ticker's cadence (leases, waits); zero: no ticker
  // thread (the test calls Tick() after advancing a FakeClock).
  static absl::StatusOr<KvStoreWithLoop> Open(std::unique_ptr<kv::KvBackend> backend,
                                              const Clock& clock, kv::KvStoreOptions options,
                                              absl::Duration tick_interval = absl::ZeroDuration()) {
    KvStoreWithLoop own;
    own.backend_ = std::move(backend);
    own.state_ = std::make_unique<SplitStateStore>(own.backend_.get(), nullptr);
    CommitLoopOptions loop_options;
    loop_options.tick_interval = tick_interval;
    own.loop_ = std::make_unique<CommitLoop>(*own.state_, loop_options);
    DDP_ASSIGN_OR_RETURN(own.store_, OpenKvStore(*own.loop_, clock, std::move(options)));
    own.loop_->Start();
    return own;
  }

  KvStoreWithLoop() = default;
  ~KvStoreWithLoop() { reset(); }
  KvStoreWithLoop(KvStoreWithLoop&&) = default;
  KvStoreWithLoop& operator=(KvStoreWithLoop&& other) {
    if (this != &other) {
      reset();
      backend_ = std::move(other.backend_);
      state_ = std::move(other.state_);
      loop_ = std::move(other.loop_);
      store_ = std::move(other.store_);
    }
    return *this;
  }

  // The store first (it flushes through the loop), then the loop's threads,
  // then what they used.
  void reset() {
    if (store_ != nullptr) store_->Shutdown();
    if (loop_ != nullptr) loop_->Shutdown();
    store_.reset();
    loop_.reset();
    state_.reset();
    backend_.reset();
  }

  kv::KvStore* get() const { return store_.get(); }
  kv::KvStore* operator->() const { return store_.get(); }
  kv::KvStore& operator*() const { return *store_; }
  explicit operator bool() const { return store_ != nullptr; }
  kv::KvBackend& backend() { return *backend_; }

 private:
  std::unique_ptr<kv::KvBackend> backend_;
  std::unique_ptr<StateStore> state_;
  std::unique_ptr<CommitLoop> loop_;
  std::unique_ptr<kv::KvStore> store_;
};

}  // namespace ddp::commit

#endif  // DDP_COORDINATOR_COMMIT_TESTING_KV_STORE_WITH_LOOP_H_
