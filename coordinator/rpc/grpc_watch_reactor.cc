#include "coordinator/rpc/grpc_watch_reactor.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "coordinator/rpc/kv_proto_convert.h"

namespace ddp::rpc {

WatchReactor::WatchReactor(kv::KvStore& store, const v1::WatchRequest& request,
                           size_t max_message_bytes, const auth::Authorizer* authorizer,
                           const auth::Identity& caller, uint64_t connection)
    : store_(store),
      max_message_bytes_(max_message_bytes),
      sink_(std::make_shared<Sink>(this, connection)) {
  kv::WatchRequest watch;
  watch.ns = request.namespace_();
  watch.prefix = request.prefix();
  watch.start_revision = request.start_revision();
  // Locked before registering: a cancellation may call OnReady right away, and
  // it must find id_ set.
  absl::MutexLock lock(&sink_->mu);
  if (watch.start_revision > 0) complete_through_ = watch.start_revision - 1;
  if (authorizer != nullptr) {
    absl::StatusOr<std::unique_ptr<auth::Authorizer::RevocationWatch>> watching =
        authorizer->WatchRevocation(
            caller, [sink = sink_](const absl::Status& revoked) { sink->OnRevoked(revoked); });
    if (!watching.ok()) {
      FinishLocked(ToGrpcStatus(watching.status()));
      return;
    }
    revocation_ = *std::move(watching);
  }
  absl::StatusOr<kv::WatchId> id = store_.Watch(watch, sink_);
  if (!id.ok()) {
    FinishLocked(ToGrpcStatus(id.status()));
    return;
  }
  id_ = *id;
  registered_ = true;
  PumpLocked(/*force=*/true);
}

void WatchReactor::Sink::OnReady() {
  absl::MutexLock lock(&mu);
  if (reactor_ != nullptr) reactor_->PumpLocked(/*force=*/false);
}

void WatchReactor::Sink::OnRevoked(const absl::Status& status) {
  absl::MutexLock lock(&mu);
  if (reactor_ != nullptr) reactor_->FinishLocked(ToGrpcStatus(status));
}

namespace {

// A commit's events as one WatchResponse: built once, sent to every watcher
// whose next message is exactly this commit.
std::shared_ptr<const v1::WatchResponse> EncodeCommit(const kv::PublishedEvents& commit) {
  auto response = std::make_shared<v1::WatchResponse>();
  response->mutable_events()->Reserve(static_cast<int>(commit.size()));
  for (const kv::Event& event : commit.events()) {
    ToProto(event, response->add_events());
  }
  response->set_revision(commit.revision());
  return response;
}

}  // namespace

void WatchReactor::PumpLocked(bool force) {
  if (gate_.busy()) return;
  if (pending_.empty()) {
    kv::WatchBatch batch;
    absl::Status status = store_.TakeWatchEvents(id_, &batch);
    if (!status.ok()) {
      FinishLocked(ToGrpcStatus(status));
      return;
    }
    revision_ = batch.revision;
    if (batch.empty()) {
      complete_through_ = std::max(complete_through_, batch.complete_through);
    } else {
      // The watcher matched nothing between what it sent and this batch.
      complete_through_ =
          std::max(complete_through_, batch.chunks.front()->events().front().revision() - 1);
      batch_complete_through_ = batch.complete_through;
    }
    for (kv::PublishedEventsPtr& chunk : batch.chunks) {
      pending_.push_back(std::move(chunk));
    }
    pending_offset_ = 0;
    if (pending_.empty() && !force) return;  // idle: the store calls OnReady later
  }
  const bool has_events = !pending_.empty();
  const v1::WatchResponse* message = &response_;
  if (pending_.size() == 1 && pending_offset_ == 0 &&
      pending_.front()->approx_bytes() <= max_message_bytes_) {
    shared_in_flight_ = pending_.front()->Encoded<v1::WatchResponse>(&EncodeCommit);
    pending_.pop_front();
    message = shared_in_flight_.get();
  } else {
    BuildOwnMessageLocked();
  }
  if (has_events) {
    // Counted as sent now: a status that ends the stream follows this
    // message. Everything before the next event to send has been sent.
    complete_through_ = batch_complete_through_;
    if (!pending_.empty()) {
      complete_through_ = pending_.front()->events()[pending_offset_].revision() - 1;
    }
  }
  gate_.Write(this, message);
}

void WatchReactor::BuildOwnMessageLocked() {
  response_.Clear();
  size_t bytes = 0;
  while (!pending_.empty() && (response_.events_size() == 0 || bytes < max_message_bytes_)) {
    const std::vector<kv::Event>& events = pending_.front()->events();
    const kv::Event& event = events[pending_offset_];
    bytes += kv::PublishedEvents::ApproxBytes(event);
    ToProto(event, response_.add_events());
    if (++pending_offset_ == events.size()) {
      pending_.pop_front();
      pending_offset_ = 0;
    }
  }
  response_.set_revision(revision_);
}

void WatchReactor::FinishLocked(const grpc::Status& status) {
  if (status.ok() || !registered_) {
    gate_.Finish(this, status);
    return;
  }
  // Where the client resumes (etcd's clients resume from the last revision
  // they saw + 1; this says it for those that did not keep it). Compaction
  // names its own way on.
  std::string message =
      absl::StrCat(status.error_message(),
                   " (this stream sent every matching event through revision ", complete_through_);
  absl::StrAppend(&message, status.error_code() == grpc::StatusCode::OUT_OF_RANGE
                                ? ")"
                                : absl::StrCat(": watch again with start_revision ",
                                               complete_through_ + 1, ")"));
  gate_.Finish(this, grpc::Status(status.error_code(), message));
}

void WatchReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&sink_->mu);
  shared_in_flight_.reset();
  if (gate_.WriteDone(this, ok, "watch stream broken")) PumpLocked(/*force=*/false);
}

void WatchReactor::OnCancel() {
  absl::MutexLock lock(&sink_->mu);
  FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled by the client"));
}

void WatchReactor::OnDone() {
  {
    absl::MutexLock lock(&sink_->mu);
    sink_->reactor_ = nullptr;
  }
  revocation_.reset();
  if (registered_) store_.CancelWatch(id_);
  delete this;
}

}  // namespace ddp::rpc
