#ifndef DDP_COORDINATOR_SESSION_TESTING_WITH_OWN_COMMIT_LOOP_H_
#define DDP_COORDINATOR_SESSION_TESTING_WITH_OWN_COMMIT_LOOP_H_

// A RendezvousService or JobServices with a commit loop of its own over a job
// store alone (or one in memory), for unit tests, the rendezvous
// stand-in (tools/rdzv_sim) and in-process probes: the coordinator's own path
// (a StateStore, the CommitLoop with its commit, delivery and ticker threads,
// the service joined to it) without a KV store. The coordinator itself runs
// one loop for the KV store and the jobs (coordinator/server).
//
//   auto jobs = StartJobServicesWithLoop(clock, &store, options);
//   (*jobs)->RegisterWith(builder); ...
//   jobs->reset();  // the service shuts down, then the loop
//
// Not testonly, so a tool may link it (as commit/testing/kv_store_with_loop.h).

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "coordinator/commit/commit_loop.h"
#include "coordinator/commit/testing/split_state_store.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/session/job_services.h"
#include "coordinator/session/rendezvous_service.h"

namespace ddp::session {

// Holds the service like a pointer: service->X(), service.get(),
// service.reset() (shuts the service, then the loop, down).
template <typename Service>
class WithOwnCommitLoop {
 public:
  // `store` (null: jobs are kept in memory only, as long as the object
  // lives) must outlive the object; the loop's cadence and its pause between
  // write retries come from `loop_options`.
  template <typename Options>
  static absl::StatusOr<WithOwnCommitLoop> Start(const Clock& clock,
                                                 rendezvous::JobStateStore* store, Options options,
                                                 commit::CommitLoopOptions loop_options) {
    if (loop_options.tick_interval <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tick_interval is ", absl::FormatDuration(loop_options.tick_interval),
                       "; it must be positive (e.g. 100ms): the jobs' timers run on it"));
    }
    WithOwnCommitLoop own;
    if (store == nullptr) {
      own.memory_ = std::make_unique<rendezvous::InMemoryJobStateStore>();
      store = own.memory_.get();
    }
    own.state_ = std::make_unique<commit::SplitStateStore>(nullptr, store);
    own.loop_ = std::make_unique<commit::CommitLoop>(*own.state_, loop_options);
    DDP_ASSIGN_OR_RETURN(own.service_, Service::Create(clock, *own.loop_, std::move(options)));
    own.loop_->Start();
    return own;
  }

  WithOwnCommitLoop() = default;
  ~WithOwnCommitLoop() { reset(); }
  WithOwnCommitLoop(WithOwnCommitLoop&&) = default;
  WithOwnCommitLoop& operator=(WithOwnCommitLoop&& other) {
    if (this != &other) {
      reset();
      memory_ = std::move(other.memory_);
      state_ = std::move(other.state_);
      loop_ = std::move(other.loop_);
      service_ = std::move(other.service_);
    }
    return *this;
  }

  // The service first (it ends its sessions and flushes through the loop),
  // then the loop's threads, then the store adapter.
  void reset() {
    if (service_ != nullptr) service_->Shutdown();
    if (loop_ != nullptr) loop_->Shutdown();
    service_.reset();
    loop_.reset();
    state_.reset();
    memory_.reset();
  }

  Service* get() const { return service_.get(); }
  Service* operator->() const { return service_.get(); }
  Service& operator*() const { return *service_; }
  explicit operator bool() const { return service_ != nullptr; }

 private:
  std::unique_ptr<rendezvous::JobStateStore> memory_;  // when given no store
  std::unique_ptr<commit::StateStore> state_;
  std::unique_ptr<commit::CommitLoop> loop_;
  std::unique_ptr<Service> service_;
};

using RendezvousServiceWithLoop = WithOwnCommitLoop<RendezvousService>;
using JobServicesWithLoop = WithOwnCommitLoop<JobServices>;

// The loop the rendezvous options ask for (their tick and retry intervals).
inline commit::CommitLoopOptions OwnLoopOptions(const RendezvousServiceOptions& options) {
  commit::CommitLoopOptions loop;
  loop.tick_interval = options.tick_interval;
  loop.retry_interval = options.write_retry_interval;
  return loop;
}

inline absl::StatusOr<RendezvousServiceWithLoop> StartRendezvousServiceWithLoop(
    const Clock& clock, rendezvous::JobStateStore* store, RendezvousServiceOptions options) {
  const commit::CommitLoopOptions loop = OwnLoopOptions(options);
  return RendezvousServiceWithLoop::Start(clock, store, std::move(options), loop);
}

inline absl::StatusOr<JobServicesWithLoop> StartJobServicesWithLoop(
    const Clock& clock, rendezvous::JobStateStore* store, JobServicesOptions options) {
  const commit::CommitLoopOptions loop = OwnLoopOptions(options.rendezvous);
  return JobServicesWithLoop::Start(clock, store, std::move(options), loop);
}

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_TESTING_WITH_OWN_COMMIT_LOOP_H_
