#include "coordinator/commit/commit_loop.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "common/failpoint.h"
#include "common/logging.h"

namespace ddp::commit {

CommitLoop::CommitLoop(StateStore& store, CommitLoopOptions options)
    : store_(store),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : MonotonicClock::Get()) {}

CommitLoop::~CommitLoop() { Shutdown(); }

void CommitLoop::Add(CommitParticipant* participant) { participants_.push_back(participant); }

void CommitLoop::Add(std::unique_ptr<CommitParticipant> participant) {
  Add(participant.get());
  owned_participants_.push_back(std::move(participant));
}

void CommitLoop::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || shut_down_) return;
    started_ = true;
  }
  delivery_ = std::thread([this] { DeliveryThread(); });
  commit_ = std::thread([this] { CommitThread(); });
  if (options_.tick_interval > absl::ZeroDuration()) {
    ticker_ = std::thread([this] { TickerThread(); });
  }
}

void CommitLoop::Notify() {
  absl::MutexLock lock(&mu_);
  ++notified_;
}

void CommitLoop::Flush() {
  absl::MutexLock lock(&mu_);
  const uint64_t target = ++notified_;
  auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return sent_ >= target || finished_ || !started_;
  };
  mu_.Await(absl::Condition(&done));
}

void CommitLoop::Tick() {
  for (CommitParticipant* participant : participants_) participant->Tick();
}

absl::Status CommitLoop::RunOnce(uint64_t through) {
  StateBatch batch;
  bool more = false;
  for (CommitParticipant* participant : participants_) more |= participant->Prepare(batch);
  absl::Status status;
  if (!batch.empty()) {
    DDP_FAILPOINT("commit_before_save");
    const absl::Time start = clock_.Now();
    status = store_.CommitState(batch);
    if (status.ok()) DDP_FAILPOINT("commit_after_save");  // durable, nothing sent yet
    if (status.ok() && options_.on_commit) options_.on_commit(batch, clock_.Now() - start);
  }
  Delivery delivery{through, {}};
  for (CommitParticipant* participant : participants_)
    participant->Finish(status, batch, delivery.sends);
  {
    absl::MutexLock lock(&delivery_mu_);
    deliveries_.push_back(std::move(delivery));
  }
  if (more) {
    absl::MutexLock lock(&mu_);
    more_ = true;
  }
  return status;
}

void CommitLoop::CommitThread() {
  pthread_setname_np(pthread_self(), "commit");
  auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return notified_ > taken_ || more_ || stopping_;
  };
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  while (true) {
    uint64_t through = 0;
    bool stop = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&wake));
      if (notified_ == taken_ && !more_) return;  // stopping, and nothing left
      through = notified_;
      taken_ = notified_;
      more_ = false;
      stop = stopping_;
    }
    const absl::Status status = RunOnce(through);
    if (status.ok()) continue;
    DDP_LOG_EVERY_N_SEC(WARNING, 10) << "commit failed: " << status;
    if (stop) return;  // the last try failed: what is not durable was never acknowledged
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.retry_interval)) {
      more_ = true;  // one last try
      continue;
    }
    more_ = true;  // retry what the participants kept
  }
}

void CommitLoop::DeliveryThread() {
  pthread_setname_np(pthread_self(), "deliver");
  std::vector<Delivery> ready;
  while (true) {
    ready.clear();
    {
      absl::MutexLock lock(&delivery_mu_);
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(delivery_mu_) {
        return delivery_stopping_ || !deliveries_.empty();
      };
      delivery_mu_.Await(absl::Condition(&wake));
      if (deliveries_.empty()) return;  // stopping, and everything sent
      ready.swap(deliveries_);
    }
    for (Delivery& delivery : ready) {
      DDP_FAILPOINT("deliver_between_batches");  // earlier batches sent, this one not
      for (std::function<void()>& send : delivery.sends) send();
      absl::MutexLock lock(&mu_);
      sent_ = std::max(sent_, delivery.through);
    }
  }
}

void CommitLoop::TickerThread() {
  pthread_setname_np(pthread_self(), "tick");
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&ticker_stop_), options_.tick_interval)) return;
    }
    Tick();
  }
}

void CommitLoop::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    ticker_stop_ = true;
  }
  if (ticker_.joinable()) ticker_.join();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (commit_.joinable()) commit_.join();  // commits what is queued first
  {
    absl::MutexLock lock(&delivery_mu_);
    delivery_stopping_ = true;
  }
  if (delivery_.joinable()) delivery_.join();  // sends what is left first
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

}  // namespace ddp::commit
