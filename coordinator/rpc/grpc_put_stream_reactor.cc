#include "coordinator/rpc/grpc_put_stream_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "coordinator/rpc/kv_call_checks.h"

namespace ddp::rpc {
namespace {

v1::StreamedPutAnswer Refusal(uint64_t id, const absl::Status& status) {
  v1::StreamedPutAnswer answer;
  answer.set_id(id);
  answer.set_code(static_cast<int32_t>(status.code()));
  answer.set_message(std::string(status.message()));
  return answer;
}

}  // namespace

PutStreamReactor::PutStreamReactor(kv::KvStore& store, const auth::Authorizer* authorizer,
                                   const auth::Identity& caller, size_t max_in_flight)
    : store_(store),
      authorizer_(authorizer),
      caller_(caller),
      max_in_flight_(max_in_flight > 0 ? max_in_flight : 1),
      shared_(std::make_shared<Shared>()) {
  absl::MutexLock lock(&shared_->mu);
  shared_->reactor = this;
  if (authorizer_ != nullptr) {
    absl::StatusOr<std::unique_ptr<auth::Authorizer::RevocationWatch>> watching =
        authorizer_->WatchRevocation(caller_, [shared = shared_](const absl::Status& revoked) {
          absl::MutexLock lock(&shared->mu);
          if (shared->reactor != nullptr) shared->reactor->FinishLocked(revoked);
        });
    if (!watching.ok()) {
      FinishLocked(watching.status());
      return;
    }
    revocation_ = *std::move(watching);
  }
  PumpLocked();
}

void PutStreamReactor::OnReadDone(bool ok) {
  {
    absl::MutexLock lock(&shared_->mu);
    if (!ok) client_done_ = true;
    // A stream already ending applies nothing more.
    bool take = ok && !gate_.finished();
    if (take && (request_.puts_size() == 0 || request_.puts_size() > kMaxPutsPerMessage)) {
      FinishLocked(absl::InvalidArgumentError(
          absl::StrCat("a PutStream message carries ", request_.puts_size(), " puts: send 1 to ",
                       kMaxPutsPerMessage)));
      take = false;
    }
    if (!take) {
      reading_ = false;
      PumpLocked();
      return;
    }
  }
  // reading_ stays true meanwhile: no new read may overwrite request_ (a put's
  // callback pumps).
  for (const v1::StreamedPut& put : request_.puts()) Start(put);
  absl::MutexLock lock(&shared_->mu);
  reading_ = false;
  PumpLocked();
}

void PutStreamReactor::Start(const v1::StreamedPut& streamed) {
  const uint64_t id = streamed.id();
  absl::StatusOr<kv::PutRequest> put =
      CheckedPut(authorizer_, caller_, streamed.put(), store_.limits());
  if (!put.ok()) {
    absl::MutexLock lock(&shared_->mu);
    AnswerLocked(Refusal(id, put.status()));
    return;
  }
  {
    absl::MutexLock lock(&shared_->mu);
    ++in_store_;
  }
  // The store may call back at once (invalid input), so not under the lock.
  store_.PutAsync(*std::move(put), [shared = shared_, id](absl::StatusOr<kv::PutResult> r) {
    PutStreamReactor* done_with = nullptr;
    {
      absl::MutexLock lock(&shared->mu);
      PutStreamReactor* self = shared->reactor;  // alive: in_store_ > 0 holds it
      --self->in_store_;
      v1::StreamedPutAnswer answer = Refusal(id, r.status());
      if (r.ok()) PutResultToProto(*r, answer.mutable_put());
      self->AnswerLocked(std::move(answer));
      self->PumpLocked();
      if (self->grpc_done_ && self->in_store_ == 0) {
        shared->reactor = nullptr;
        done_with = self;
      }
    }
    delete done_with;
  });
}

void PutStreamReactor::AnswerLocked(v1::StreamedPutAnswer answer) {
  if (gate_.finished()) return;  // the stream ended: nobody to tell
  answers_.push_back(std::move(answer));
}

void PutStreamReactor::PumpLocked() {
  if (grpc_done_ || gate_.finished()) return;
  if (!gate_.busy() && !answers_.empty()) {
    // Every answer ready now in one message.
    writing_.Clear();
    writing_.mutable_answers()->Reserve(static_cast<int>(answers_.size()));
    for (v1::StreamedPutAnswer& answer : answers_) *writing_.add_answers() = std::move(answer);
    answers_.clear();
    gate_.Write(this, &writing_);
  }
  const size_t out = in_store_ + answers_.size() + (gate_.busy() ? writing_.answers_size() : 0);
  if (!reading_ && !client_done_ && out < max_in_flight_) {
    reading_ = true;
    StartRead(&request_);
  }
  if (client_done_ && in_store_ == 0 && answers_.empty() && !gate_.busy()) {
    gate_.Finish(this, grpc::Status::OK);
  }
}

void PutStreamReactor::FinishLocked(const absl::Status& status) {
  if (grpc_done_) return;
  answers_.clear();
  gate_.Finish(this, ToGrpcStatus(status));
}

void PutStreamReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&shared_->mu);
  if (gate_.WriteDone(this, ok, "put stream broken")) PumpLocked();
}

void PutStreamReactor::OnCancel() {
  absl::MutexLock lock(&shared_->mu);
  FinishLocked(absl::CancelledError("put stream cancelled by the client"));
}

void PutStreamReactor::OnDone() {
  bool now = false;
  {
    absl::MutexLock lock(&shared_->mu);
    grpc_done_ = true;
    answers_.clear();
    now = in_store_ == 0;
    if (now) shared_->reactor = nullptr;
  }
  if (now) delete this;
}

}  // namespace ddp::rpc
