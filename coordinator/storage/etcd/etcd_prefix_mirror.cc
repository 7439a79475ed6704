#include "coordinator/storage/etcd/etcd_prefix_mirror.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "coordinator/storage/etcd/etcd_channel.h"

namespace ddp::storage {
namespace {

// Keys per page of a snapshot.
constexpr int64_t kPageKeys = 1000;

}  // namespace

std::string EtcdPrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

EtcdPrefixMirror::EtcdPrefixMirror(std::shared_ptr<grpc::Channel> etcd,
                                   EtcdPrefixMirrorOptions options)
    : options_(std::move(options)),
      range_end_(EtcdPrefixEnd(options_.prefix)),
      kv_(etcdserverpb::KV::NewStub(etcd)),
      watch_(etcdserverpb::Watch::NewStub(etcd)) {}

std::unique_ptr<EtcdPrefixMirror> EtcdPrefixMirror::Start(std::shared_ptr<grpc::Channel> etcd,
                                                          EtcdPrefixMirrorOptions options) {
  std::unique_ptr<EtcdPrefixMirror> mirror(
      new EtcdPrefixMirror(std::move(etcd), std::move(options)));
  mirror->thread_ = std::thread([m = mirror.get()] { m->Run(); });
  return mirror;
}

EtcdPrefixMirror::~EtcdPrefixMirror() { Stop(); }

int64_t EtcdPrefixMirror::revision() const {
  absl::MutexLock lock(&mu_);
  return state_.revision;
}

size_t EtcdPrefixMirror::size() const {
  absl::MutexLock lock(&mu_);
  return state_.keys.size();
}

int EtcdPrefixMirror::snapshots() const {
  absl::MutexLock lock(&mu_);
  return snapshots_;
}

bool EtcdPrefixMirror::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool EtcdPrefixMirror::Kept(const std::string& key) const {
  for (const std::string& skip : options_.skip) {
    if (absl::StartsWith(key, skip)) return false;
  }
  return true;
}

void EtcdPrefixMirror::Apply(EtcdPrefixSnapshot& to, std::string key,
                             std::optional<std::string> value, int64_t mod_revision) const {
  if (!Kept(key)) return;
  if (to.view != nullptr && to.view->Takes(key)) {
    if (value) {
      to.view->Put(key, *std::move(value));
    } else {
      to.view->Delete(key);
    }
    return;
  }
  if (!value) {
    to.keys.erase(key);
    return;
  }
  EtcdMirroredValue& held = to.keys[std::move(key)];
  held.value = *std::move(value);
  held.mod_revision = mod_revision;
}

void EtcdPrefixMirror::Run() {
  bool synced = false;
  while (true) {
    if (!synced) {
      const absl::Time started = absl::Now();
      absl::StatusOr<EtcdPrefixSnapshot> snapshot = ReadSnapshot();
      if (!snapshot.ok()) {
        if (stopping()) return;
        DDP_LOG_EVERY_N_SEC(WARNING, 10)
            << "mirror of " << options_.prefix << ": cannot read a snapshot (" << snapshot.status()
            << "); retrying";
      } else {
        const int64_t revision = snapshot->revision;
        const size_t viewed = snapshot->view != nullptr ? snapshot->view->size() : 0;
        const size_t keys = snapshot->keys.size() + viewed;
        {
          absl::MutexLock lock(&mu_);
          if (stopping_) return;
          state_ = *std::move(snapshot);
          ++snapshots_;
        }
        synced = true;
        DDP_LOG(INFO) << "mirror of " << options_.prefix << ": " << keys << " keys (" << viewed
                      << " of them decoded) at etcd revision " << revision << ", read in "
                      << absl::FormatDuration(absl::Now() - started) << "; following its changes";
      }
    }
    if (synced) {
      const absl::Status followed = Follow();
      if (stopping()) return;
      if (absl::IsOutOfRange(followed)) {
        synced = false;
        DDP_LOG(WARNING) << "mirror of " << options_.prefix << ": " << followed.message()
                         << "; reading a fresh snapshot";
        continue;
      }
      DDP_LOG_EVERY_N_SEC(WARNING, 10)
          << "mirror of " << options_.prefix << ": " << followed.message()
          << "; watching again from revision " << revision() + 1;
    }
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.retry_pause);
    if (stopping_) return;
  }
}

absl::StatusOr<EtcdPrefixSnapshot> EtcdPrefixMirror::ReadSnapshot() {
  // The prefix less the skipped ranges: [prefix, skip1), [end(skip1),
  // skip2), ..., [end(skipN), end(prefix)), every page read at the revision
  // of the first one.
  std::vector<std::string> skips = options_.skip;
  std::sort(skips.begin(), skips.end());
  std::vector<std::pair<std::string, std::string>> ranges;
  std::string from = options_.prefix;
  for (const std::string& skip : skips) {
    if (skip < from) {
      from = std::max(from, EtcdPrefixEnd(skip));
      continue;
    }
    ranges.emplace_back(from, skip);
    from = std::max(from, EtcdPrefixEnd(skip));
  }
  if (from < range_end_) ranges.emplace_back(from, range_end_);
  EtcdPrefixSnapshot out;
  if (options_.new_view) out.view = options_.new_view();
  for (auto& [key, end] : ranges) {
    while (key < end) {
      etcdserverpb::RangeRequest request;
      request.set_key(key);
      request.set_range_end(end);
      request.set_limit(kPageKeys);
      request.set_revision(out.revision);  // 0 for the first page: the latest
      etcdserverpb::RangeResponse response;
      grpc::ClientContext context;
      context.set_deadline(EtcdDeadline(options_.rpc_timeout));
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return absl::CancelledError("stopped");
        call_ = &context;
      }
      const grpc::Status status = kv_->Range(&context, request, &response);
      {
        absl::MutexLock lock(&mu_);
        call_ = nullptr;
      }
      if (!status.ok()) {
        // The revision compacted meanwhile: a new snapshot, at the latest.
        return absl::UnavailableError(
            absl::StrCat("etcd Range failed: ", FromGrpcStatus(status).ToString()));
      }
      if (out.revision == 0) out.revision = response.header().revision();
      for (etcdserverpb::KeyValue& kv : *response.mutable_kvs()) {
        Apply(out, kv.key(), std::move(*kv.mutable_value()), kv.mod_revision());
      }
      if (!response.more() || response.kvs_size() == 0) break;
      key = response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0');
    }
  }
  if (out.revision == 0) return absl::UnavailableError("etcd answered no revision");
  if (out.view != nullptr) out.view->Settle();
  return out;
}

absl::Status EtcdPrefixMirror::Follow() {
  grpc::ClientContext context;
  int64_t from;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopped");
    call_ = &context;
    from = state_.revision + 1;
  }
  auto stream = watch_->Watch(&context);
  etcdserverpb::WatchRequest request;
  request.mutable_create_request()->set_key(options_.prefix);
  request.mutable_create_request()->set_range_end(range_end_);
  request.mutable_create_request()->set_start_revision(from);
  const bool sent = stream->Write(request);
  absl::Status ended =
      absl::UnavailableError(sent ? "etcd ended the watch" : "cannot send the watch request");
  etcdserverpb::WatchResponse response;
  bool open = sent;
  while (open && (open = stream->Read(&response))) {
    if (response.compact_revision() != 0) {
      ended = absl::OutOfRangeError(absl::StrCat("etcd compacted its history to revision ",
                                                 response.compact_revision(), ", past revision ",
                                                 from, " from which the mirror followed it"));
      break;
    }
    if (response.canceled()) {
      ended = absl::UnavailableError(
          absl::StrCat("etcd cancelled the watch (", response.cancel_reason(), ")"));
      break;
    }
    if (response.events_size() == 0) continue;
    absl::MutexLock lock(&mu_);
    if (stopping_) break;  // TakeAt has the state: nothing more is applied
    for (etcdserverpb::Event& event : *response.mutable_events()) {
      etcdserverpb::KeyValue& kv = *event.mutable_kv();
      std::optional<std::string> value;
      if (event.type() != etcdserverpb::Event::DELETE) value = std::move(*kv.mutable_value());
      Apply(state_, std::move(*kv.mutable_key()), std::move(value), kv.mod_revision());
    }
    if (state_.view != nullptr) state_.view->Settle();
    // etcd never splits one revision's changes over two answers: every
    // change up to the last one's revision is applied now.
    state_.revision =
        std::max(state_.revision, response.events(response.events_size() - 1).kv().mod_revision());
  }
  if (open) context.TryCancel();  // left while etcd still sends
  const grpc::Status finished = stream->Finish();
  absl::MutexLock lock(&mu_);
  call_ = nullptr;
  if (!open && !finished.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the watch broke (", FromGrpcStatus(finished).ToString(), ")"));
  }
  return ended;
}

absl::StatusOr<EtcdPrefixSnapshot> EtcdPrefixMirror::TakeAt(int64_t revision,
                                                            absl::Duration timeout) {
  EtcdPrefixSnapshot out;
  {
    absl::MutexLock lock(&mu_);
    auto there = [this, revision]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || (snapshots_ > 0 && state_.revision >= revision);
    };
    mu_.AwaitWithTimeout(absl::Condition(&there), timeout);
    if (taken_) return absl::FailedPreconditionError("the mirror was already taken");
    if (stopping_) return absl::FailedPreconditionError("the mirror was stopped");
    if (snapshots_ == 0 || state_.revision < revision) {
      return absl::DeadlineExceededError(
          absl::StrCat("the mirror of ", options_.prefix, " did not reach etcd revision ", revision,
                       " within ", absl::FormatDuration(timeout),
                       snapshots_ == 0 ? " (its first snapshot is not read yet)"
                                       : absl::StrCat(" (it is at ", state_.revision, ")")));
    }
    stopping_ = true;
    taken_ = true;
    if (call_ != nullptr) call_->TryCancel();
    out = std::move(state_);
    state_ = EtcdPrefixSnapshot();
  }
  if (thread_.joinable()) thread_.join();
  return out;
}

void EtcdPrefixMirror::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (call_ != nullptr) call_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace ddp::storage
