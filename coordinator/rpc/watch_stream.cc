#include "coordinator/rpc/watch_stream.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "coordinator/rpc/kv_proto_convert.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace ddp::rpc {

WatchStream::WatchStream(WatchTransport* transport, kv::KvStore& store, size_t max_message_bytes,
                         const auth::Authorizer* authorizer, const auth::Identity& caller,
                         uint64_t connection)
    : transport_(transport),
      store_(store),
      max_message_bytes_(max_message_bytes),
      authorizer_(authorizer),
      caller_(caller),
      sink_(std::make_shared<Sink>(this, connection)) {}

void WatchStream::Start(const v1::WatchRequest& request) {
  kv::WatchRequest watch;
  watch.ns = request.namespace_();
  watch.prefix = request.prefix();
  watch.start_revision = request.start_revision();
  // Locked before registering: a cancellation may call OnReady right away, and
  // it must find id_ set.
  absl::MutexLock lock(&sink_->mu);
  if (watch.start_revision > 0) complete_through_ = watch.start_revision - 1;
  if (authorizer_ != nullptr) {
    absl::StatusOr<std::unique_ptr<auth::Authorizer::RevocationWatch>> watching =
        authorizer_->WatchRevocation(
            caller_, [sink = sink_](const absl::Status& revoked) { sink->OnRevoked(revoked); });
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

void WatchStream::Sink::OnReady() {
  absl::MutexLock lock(&mu);
  if (stream_ != nullptr) stream_->PumpLocked(/*force=*/false);
}

void WatchStream::Sink::OnRevoked(const absl::Status& status) {
  absl::MutexLock lock(&mu);
  if (stream_ != nullptr) stream_->FinishLocked(ToGrpcStatus(status));
}

namespace {

// False when protobuf cannot (a message past 2 GiB; the store's limits keep
// far below).
bool Serialize(const v1::WatchResponse& response, grpc::ByteBuffer* buffer) {
  buffer->Clear();  // the writer wants an empty buffer; the previous write holds its own copy
  bool own = false;
  return grpc::SerializationTraits<v1::WatchResponse>::Serialize(response, buffer, &own).ok();
}

// A commit's events as one serialized WatchResponse: built once, sent to
// every watcher whose next message is exactly this commit (a copy of the
// buffer shares its bytes); null when it cannot be serialized.
std::shared_ptr<const grpc::ByteBuffer> EncodeCommit(const kv::PublishedEvents& commit) {
  v1::WatchResponse response;
  response.mutable_events()->Reserve(static_cast<int>(commit.size()));
  for (const kv::Event& event : commit.events()) {
    ToProto(event, response.add_events());
  }
  response.set_revision(commit.revision());
  auto buffer = std::make_shared<grpc::ByteBuffer>();
  if (!Serialize(response, buffer.get())) return nullptr;
  return buffer;
}

}  // namespace

void WatchStream::PumpLocked(bool force) {
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
  const grpc::ByteBuffer* message = &own_message_;
  if (pending_.size() == 1 && pending_offset_ == 0 &&
      pending_.front()->approx_bytes() <= max_message_bytes_) {
    shared_in_flight_ = pending_.front()->Encoded<grpc::ByteBuffer>(&EncodeCommit);
    pending_.pop_front();
    message = shared_in_flight_.get();
  } else {
    BuildOwnMessageLocked();
    if (!Serialize(response_, &own_message_)) message = nullptr;
  }
  if (message == nullptr) {
    // Its events count as not sent: the status names where to resume.
    FinishLocked(grpc::Status(
        grpc::StatusCode::INTERNAL,
        absl::StrCat("a watch message of revision ", revision_, " could not be serialized")));
    return;
  }
  if (has_events) {
    // Counted as sent now: a status that ends the stream follows this
    // message. Everything before the next event to send has been sent.
    complete_through_ = batch_complete_through_;
    if (!pending_.empty()) {
      complete_through_ = pending_.front()->events()[pending_offset_].revision() - 1;
    }
  }
  gate_.Write(transport_, message);
}

void WatchStream::BuildOwnMessageLocked() {
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

void WatchStream::FinishLocked(const grpc::Status& status) {
  if (status.ok() || !registered_) {
    gate_.Finish(transport_, status);
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
  gate_.Finish(transport_, grpc::Status(status.error_code(), message));
}

void WatchStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&sink_->mu);
  shared_in_flight_.reset();
  if (gate_.WriteDone(transport_, ok, "watch stream broken")) PumpLocked(/*force=*/false);
}

void WatchStream::OnCancel() {
  absl::MutexLock lock(&sink_->mu);
  FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled by the client"));
}

void WatchStream::OnDone() {
  {
    absl::MutexLock lock(&sink_->mu);
    sink_->stream_ = nullptr;
  }
  revocation_.reset();
  if (registered_) store_.CancelWatch(id_);
}

}  // namespace ddp::rpc
