#include "coordinator/session/grpc_job_watch_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "coordinator/session/job_proto_convert.h"

namespace ddp::session {

JobWatchReactor::JobWatchReactor(RendezvousService& rendezvous, const v1::WatchJobRequest& request,
                                 const GrpcJobServiceOptions& options, const auth::Identity& caller)
    : rendezvous_(rendezvous),
      job_id_(request.job_id()),
      catch_up_page_(options.catch_up_page > 0 ? options.catch_up_page : 1),
      max_buffered_bytes_(options.watch_buffer_bytes),
      listener_(std::make_shared<Listener>(this)) {
  absl::MutexLock lock(&listener_->mu);
  absl::Status status = rendezvous::ValidateId(request.job_id(), "job id", rendezvous_.limits());
  if (status.ok() && request.from_index() < 0) {
    status = absl::InvalidArgumentError(
        absl::StrCat("from_index ", request.from_index(),
                     " is negative; use 0 for new events only, or an index "
                     ">= 1"));
  }
  if (!status.ok()) {
    FinishLocked(ToGrpcStatus(status));
    return;
  }
  if (options.authorizer != nullptr) {
    absl::StatusOr<std::unique_ptr<auth::Authorizer::RevocationWatch>> watching =
        options.authorizer->WatchRevocation(
            caller,
            [listener = listener_](const absl::Status& revoked) { listener->OnRevoked(revoked); });
    if (!watching.ok()) {
      FinishLocked(ToGrpcStatus(watching.status()));
      return;
    }
    revocation_ = *std::move(watching);
  }
  // Subscribe before reading the job, so nothing happens unseen in between.
  absl::StatusOr<JobWatchHub::WatchId> id = rendezvous_.WatchJob(job_id_, listener_);
  if (!id.ok()) {
    FinishLocked(ToGrpcStatus(id.status()));
    return;
  }
  watch_id_ = *id;
  watching_ = true;
  absl::StatusOr<v1::Job> job = rendezvous_.GetJobIncludingPending(job_id_);
  if (!job.ok()) {
    FinishLocked(ToGrpcStatus(job.status()));
    return;
  }
  if (request.from_index() == 0) {
    if (rendezvous::IsTerminal(job->state())) {
      FinishLocked(grpc::Status::OK);  // nothing new will happen
      return;
    }
    // New events only: the hub may still deliver events that happened before
    // the subscription (published after it), skip those.
    next_index_ = job->last_event_index() + 1;
  } else {
    catching_up_ = true;
    next_index_ = request.from_index();
  }
  PumpLocked();
}

size_t JobWatchReactor::ApproxBytes(const rendezvous::JobEvent& event) {
  // 96: the fixed fields and the deque's node, generously.
  size_t bytes = event.job_id().size() + event.node_id().size() + event.message().size() + 96;
  if (event.has_failure())
    bytes += event.failure().node_id().size() + event.failure().message().size();
  return bytes;
}

void JobWatchReactor::Listener::OnReady() {
  absl::MutexLock lock(&mu);
  if (reactor_ == nullptr || reactor_->gate_.finished()) return;
  // Take the events now, even with a write in flight: the hub's queue stays
  // short and the bound below is the one that counts.
  absl::Status status = reactor_->TakeLiveLocked();
  if (!status.ok()) {
    reactor_->FinishLocked(ToGrpcStatus(status));
    return;
  }
  reactor_->PumpLocked();
}

void JobWatchReactor::Listener::OnRevoked(const absl::Status& status) {
  absl::MutexLock lock(&mu);
  if (reactor_ != nullptr) reactor_->FinishLocked(ToGrpcStatus(status));
}

absl::Status JobWatchReactor::TakeLiveLocked() {
  if (!watching_) return absl::OkStatus();
  std::vector<rendezvous::JobEvent> live;
  DDP_RETURN_IF_ERROR(rendezvous_.TakeWatchedEvents(watch_id_, &live));
  for (rendezvous::JobEvent& e : live) {
    buffered_bytes_ += ApproxBytes(e);
    (catching_up_ ? live_ : pending_).push_back(std::move(e));
  }
  if (buffered_bytes_ <= max_buffered_bytes_) return absl::OkStatus();
  // Its client reads slower than the job changes: end the stream rather than
  // hold more. Every event below next_index_ was (or is being) written.
  const size_t held = buffered_bytes_;
  pending_.clear();
  live_.clear();
  buffered_bytes_ = 0;
  rendezvous_.CancelWatch(watch_id_);
  watching_ = false;
  return absl::ResourceExhaustedError(
      absl::StrCat("the watcher of job '", rendezvous::Capped(job_id_), "' fell behind: it holds ",
                   held, " bytes of events its client has not read (limit ", max_buffered_bytes_,
                   ", --watch-buffer-bytes); watch again with from_index=", next_index_));
}

absl::Status JobWatchReactor::RefillLocked() {
  if (catching_up_) {
    DDP_ASSIGN_OR_RETURN(std::vector<rendezvous::JobEvent> page,
                         rendezvous_.EventsSince(job_id_, next_index_ - 1, catch_up_page_));
    if (static_cast<int>(page.size()) < catch_up_page_) {
      catching_up_ = false;
      DDP_ASSIGN_OR_RETURN(v1::Job job, rendezvous_.GetJobIncludingPending(job_id_));
      end_when_drained_ = rendezvous::IsTerminal(job.state());
      last_event_index_ = job.last_event_index();
    }
    for (rendezvous::JobEvent& e : page) {
      buffered_bytes_ += ApproxBytes(e);
      pending_.push_back(std::move(e));
    }
    if (!catching_up_) {
      // The live events taken meanwhile follow (those already sent in the
      // page are skipped when sending).
      for (rendezvous::JobEvent& e : live_) pending_.push_back(std::move(e));
      live_.clear();
    }
    if (!pending_.empty() || catching_up_) return absl::OkStatus();
  }
  return TakeLiveLocked();
}

void JobWatchReactor::PumpLocked() {
  if (gate_.busy()) return;
  if (job_finished_sent_) {
    FinishLocked(grpc::Status::OK);
    return;
  }
  while (true) {
    if (pending_.empty()) {
      absl::Status status = RefillLocked();
      if (!status.ok()) {
        FinishLocked(ToGrpcStatus(status));
        return;
      }
    }
    if (pending_.empty()) {
      if (end_when_drained_ && !catching_up_ && next_index_ > last_event_index_) {
        FinishLocked(grpc::Status::OK);
      }
      return;  // idle: the hub calls OnReady when events arrive
    }
    rendezvous::JobEvent event = std::move(pending_.front());
    pending_.pop_front();
    buffered_bytes_ -= ApproxBytes(event);
    if (event.index() < next_index_) continue;  // sent already
    next_index_ = event.index() + 1;
    job_finished_sent_ = event.type() == rendezvous::JobEvent::JOB_FINISHED;
    outgoing_ = std::move(event);  // the event as the core keeps it
    gate_.Write(this, &outgoing_);
    return;
  }
}

void JobWatchReactor::FinishLocked(const grpc::Status& status) { gate_.Finish(this, status); }

void JobWatchReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&listener_->mu);
  if (gate_.WriteDone(this, ok, "watch stream broken while writing")) PumpLocked();
}

void JobWatchReactor::OnCancel() {
  absl::MutexLock lock(&listener_->mu);
  FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled by the client"));
}

void JobWatchReactor::OnDone() {
  bool watching = false;
  {
    absl::MutexLock lock(&listener_->mu);
    listener_->reactor_ = nullptr;
    watching = watching_;
  }
  revocation_.reset();
  if (watching) rendezvous_.CancelWatch(watch_id_);
  delete this;
}

}  // namespace ddp::session
