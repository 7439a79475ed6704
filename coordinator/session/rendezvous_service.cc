#include "coordinator/session/rendezvous_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace ddp::session {

absl::StatusOr<std::unique_ptr<RendezvousService>> RendezvousService::Create(
    const Clock& clock, commit::CommitLoop& loop, RendezvousServiceOptions options) {
  std::unique_ptr<RendezvousService> service(
      new RendezvousService(clock, &loop.store(), std::move(options)));
  DDP_RETURN_IF_ERROR(service->Join(loop));
  return service;
}

RendezvousService::RendezvousService(const Clock& clock, rendezvous::JobStateStore* store,
                                     RendezvousServiceOptions options)
    : clock_(clock), options_(std::move(options)), watch_hub_(options_.watch) {
  rendezvous::JobRegistryOptions registry_options;
  registry_options.max_jobs = options_.max_jobs;
  registry_options.limits = options_.limits;
  registry_options.stall_threshold = options_.stall_threshold;
  registry_options.take_dropped_heartbeats = options_.take_dropped_heartbeats;
  registry_options.serving_check = options_.serving_check;
  registry_options.write_check = options_.write_check;
  // Both wake the loop; set before Join, used only once it runs.
  registry_options.on_outbox = [this] {
    if (loop_ != nullptr) loop_->Notify();
  };
  registry_options.on_pending = [this] {
    if (loop_ != nullptr) loop_->Notify();
  };
  registry_ = std::make_unique<rendezvous::JobRegistry>(clock_, store, registry_options);
}

absl::Status RendezvousService::Join(commit::CommitLoop& loop) {
  DDP_RETURN_IF_ERROR(registry_->Restore());
  loop_ = &loop;
  loop.Add(this);
  // What the restore queued (messages to nobody yet, events) leaves with the
  // loop's first pass.
  loop.Notify();
  return absl::OkStatus();
}

RendezvousService::~RendezvousService() { Shutdown(); }

bool RendezvousService::Prepare(commit::StateBatch& batch) {
  in_flight_ = registry_->TakeCommitBatch();
  for (rendezvous::JobChanges& changes : in_flight_.changes) {
    batch.jobs.push_back(std::move(changes));
  }
  in_flight_.changes.clear();
  return false;
}

void RendezvousService::Finish(const absl::Status& status, commit::StateBatch& batch,
                               commit::Sends& sends) {
  std::vector<std::function<void()>> due;
  if (in_flight_.number != 0) {
    if (!status.ok()) in_flight_.changes = std::move(batch.jobs);  // kept, taken again
    due = registry_->BatchDone(status, std::move(in_flight_));
    in_flight_ = {};
  }
  rendezvous::Outbox taken = registry_->TakeOutbox();
  if (taken.empty() && due.empty()) return;
  auto outbox = std::make_shared<rendezvous::Outbox>(std::move(taken));
  sends.push_back([this, outbox, due = std::move(due)] {
    Send(*outbox);
    for (const std::function<void()>& fn : due) fn();
  });
}

void RendezvousService::Send(const rendezvous::Outbox& outbox) {
  for (const rendezvous::OutboundMessage& message : outbox.messages) {
    if (!router_.Route(message)) {
      DDP_LOG(DEBUG) << "no session of node " << message.node_id << " incarnation "
                     << message.incarnation << " in job " << message.job_id << "; message dropped";
    }
  }
  if (!outbox.events.empty()) {
    watch_hub_.Publish(outbox.events);
    if (options_.on_events) options_.on_events(outbox.events);
  }
}

absl::StatusOr<rendezvous::RegisterResult> RendezvousService::OpenSession(
    const rendezvous::RegisterRequest& request, std::shared_ptr<SessionSink> sink) {
  SessionSink* const stream = sink.get();
  router_.Attach(request.job_id, request.node_id, request.incarnation, std::move(sink));
  absl::StatusOr<rendezvous::RegisterResult> result = registry_->Register(request);
  if (!result.ok()) {
    router_.Detach(request.job_id, request.node_id, stream);
    return result.status();
  }
  for (const SessionRouter::SinkPtr& older :
       router_.Confirm(request.job_id, request.node_id, stream)) {
    older->Close(absl::AbortedError(absl::StrCat(
        "node '", request.node_id, "' of job '", request.job_id, "' was replaced by incarnation ",
        request.incarnation, result->resumed ? " (session resumed on a newer stream)" : "",
        "; this stream is closed")));
  }
  return result;
}

absl::Status RendezvousService::LeaveSession(const rendezvous::NodeRef& ref,
                                             std::shared_ptr<SessionSink> sink) {
  absl::Status status = registry_->Leave(ref);
  // UNAVAILABLE: removed in memory, not yet durable; the node is gone.
  if (!status.ok() && !absl::IsUnavailable(status)) return status;
  registry_->WhenDurable(registry_->DurabilityMark(),
                         [sink = std::move(sink)] { sink->Close(absl::OkStatus()); });
  return absl::OkStatus();
}

void RendezvousService::SessionEnded(const rendezvous::NodeRef& ref, const SessionSink* sink,
                                     bool left) {
  const bool current = router_.Detach(ref.job_id, ref.node_id, sink);
  if (left || !current) return;  // gone already, or a newer stream took over
  absl::Status status = registry_->StreamClosed(ref);
  if (!status.ok()) {
    DDP_LOG(DEBUG) << "stream close of node " << ref.node_id << ": " << status.message();
  }
}

void RendezvousService::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  // The last changes are committed and their messages sent.
  if (loop_ != nullptr) loop_->Flush();
  watch_hub_.Shutdown();
}

}  // namespace ddp::session
