#include "coordinator/session/rendezvous_service.h"

#include <pthread.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace ddp::session {
namespace {

void NameThisThread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousService>> RendezvousService::Create(
    const Clock& clock, rendezvous::JobStateStore* store, RendezvousServiceOptions options) {
  if (options.tick_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("tick_interval is ",
                                                   absl::FormatDuration(options.tick_interval),
                                                   "; it must be positive (e.g. 100ms)"));
  }
  std::unique_ptr<RendezvousService> service(
      new RendezvousService(clock, store, std::move(options)));
  absl::Status status = service->registry_->Restore();
  if (!status.ok()) return status;
  service->Start();
  return service;
}

RendezvousService::RendezvousService(const Clock& clock, rendezvous::JobStateStore* store,
                                     RendezvousServiceOptions options)
    : clock_(clock),
      options_(std::move(options)),
      watch_hub_(options_.watch),
      write_behind_(store != nullptr) {
  rendezvous::JobRegistryOptions registry_options;
  registry_options.max_jobs = options_.max_jobs;
  registry_options.limits = options_.limits;
  registry_options.on_outbox = [this] { OnOutbox(); };
  registry_options.on_pending = [this] { OnPending(); };
  registry_ = std::make_unique<rendezvous::JobRegistry>(clock_, store, registry_options);
}

RendezvousService::~RendezvousService() { Shutdown(); }

void RendezvousService::Start() {
  if (write_behind_) writer_ = std::thread([this] { WriterLoop(); });
  ticker_ = std::thread([this] { TickerLoop(); });
  dispatcher_ = std::thread([this] { DispatchLoop(); });
}

void RendezvousService::OnOutbox() {
  absl::MutexLock lock(&mu_);
  outbox_ready_ = true;
}

void RendezvousService::OnPending() {
  absl::MutexLock lock(&mu_);
  writes_pending_ = true;
}

void RendezvousService::WriterLoop() {
  NameThisThread("rdzv-writer");
  auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || writes_pending_; };
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  while (true) {
    bool stop = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&wake));
      stop = stopping_;
      writes_pending_ = false;
    }
    // Changes that arrive while a batch is written form the next batch.
    while (registry_->HasPendingWrites()) {
      const absl::Time start = absl::Now();
      absl::Status status = registry_->PersistPending();
      if (status.ok()) {
        if (options_.on_commit) options_.on_commit(absl::Now() - start);
        continue;
      }
      DDP_LOG_EVERY_N_SEC(WARNING, 10) << status.message();
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.write_retry_interval)) {
        return;  // what is not durable was never acknowledged
      }
    }
    if (stop) return;
  }
}

void RendezvousService::TickerLoop() {
  NameThisThread("rdzv-ticker");
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.tick_interval)) {
        return;
      }
    }
    registry_->Tick();
  }
}

void RendezvousService::DispatchLoop() {
  NameThisThread("rdzv-dispatch");
  auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return dispatcher_stopping_ || outbox_ready_;
  };
  while (true) {
    bool stop = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&wake));
      stop = dispatcher_stopping_;
      outbox_ready_ = false;
    }
    // Drain even when stopping: the last changes' messages go out.
    Drain();
    if (stop) return;
  }
}

void RendezvousService::Drain() {
  // on_outbox fires only on empty -> non-empty, so keep taking until empty.
  while (true) {
    rendezvous::Outbox outbox = registry_->TakeOutbox();
    if (outbox.empty()) return;
    for (const rendezvous::OutboundMessage& message : outbox.messages) {
      if (!router_.Route(message)) {
        DDP_LOG(DEBUG) << "no session of node " << message.node_id << " incarnation "
                       << message.incarnation << " in job " << message.job_id
                       << "; message dropped";
      }
    }
    if (!outbox.events.empty()) {
      watch_hub_.Publish(outbox.events);
      if (options_.on_events) options_.on_events(outbox.events);
    }
  }
}

void RendezvousService::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;  // another caller stops the threads
    stopping_ = true;
  }
  // The writer first: its last batch releases held messages to the dispatcher.
  if (writer_.joinable()) writer_.join();
  if (ticker_.joinable()) ticker_.join();
  {
    absl::MutexLock lock(&mu_);
    dispatcher_stopping_ = true;
  }
  if (dispatcher_.joinable()) dispatcher_.join();
  watch_hub_.Shutdown();
}

}  // namespace ddp::session
