// The typed entry points of KvStore: validation, queuing of writes, Wait, and
// the synchronous wrappers. The machinery (committer, ticker, reads) is in
// kv_store.cc.

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/kv/kv_validation.h"

namespace ddp::kv {
namespace {

absl::Status ValidateKeyInNamespace(const std::string& ns, const std::string& key,
                                    const KvLimits& limits) {
  if (absl::Status s = ValidateNamespace(ns, limits); !s.ok()) return s;
  return ValidateKey(key, limits);
}

// Adapts a typed callback to the committer's WriteOutcome callback.
template <typename T, typename Convert>
std::function<void(absl::StatusOr<WriteOutcome>)> Adapt(Callback<T> done, Convert convert) {
  return [done = std::move(done), convert](absl::StatusOr<WriteOutcome> outcome) {
    if (!outcome.ok()) {
      done(outcome.status());
    } else {
      done(convert(*std::move(outcome)));
    }
  };
}

template <typename T, typename Start>
absl::StatusOr<T> RunSync(Start start) {
  absl::Notification finished;
  std::optional<absl::StatusOr<T>> result;
  start([&](absl::StatusOr<T> r) {
    result = std::move(r);
    finished.Notify();
  });
  finished.WaitForNotification();
  return *std::move(result);
}

}  // namespace

void KvStore::PutAsync(PutRequest request, Callback<PutResult> done) {
  absl::Status valid = ValidateKeyInNamespace(request.ns, request.key, options_.limits);
  if (valid.ok()) valid = ValidateValue(request.value, options_.limits);
  if (valid.ok() && request.lease != 0) valid = ValidateLeaseId(request.lease);
  if (valid.ok() && request.condition == PutRequest::Condition::kExpectedModRevision &&
      request.expected_mod_revision < 0) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("expected_mod_revision ", request.expected_mod_revision, " is negative"));
  }
  if (!valid.ok()) return done(valid);
  PendingWrite write;
  write.op = std::move(request);
  write.done = Adapt<PutResult>(std::move(done), [](WriteOutcome o) {
    return PutResult{o.revision, std::move(o.previous)};
  });
  Enqueue(std::move(write));
}

void KvStore::DeleteAsync(DeleteRequest request, Callback<DeleteResult> done) {
  absl::Status valid = ValidateNamespace(request.ns, options_.limits);
  if (valid.ok()) {
    valid = request.prefix ? ValidatePrefix(request.key, options_.limits)
                           : ValidateKey(request.key, options_.limits);
  }
  if (!valid.ok()) return done(valid);
  PendingWrite write;
  write.op = std::move(request);
  write.done = Adapt<DeleteResult>(std::move(done), [](WriteOutcome o) {
    return DeleteResult{o.deleted, o.revision};
  });
  Enqueue(std::move(write));
}

void KvStore::CompareAndSetAsync(CompareAndSetRequest request, Callback<CompareAndSetResult> done) {
  absl::Status valid = ValidateKeyInNamespace(request.ns, request.key, options_.limits);
  if (valid.ok()) valid = ValidateValue(request.expected, options_.limits);
  if (valid.ok()) valid = ValidateValue(request.desired, options_.limits);
  if (!valid.ok()) return done(valid);
  PendingWrite write;
  write.op = std::move(request);
  write.done = Adapt<CompareAndSetResult>(std::move(done), [](WriteOutcome o) {
    return CompareAndSetResult{std::move(o.value), o.swapped, o.revision};
  });
  Enqueue(std::move(write));
}

void KvStore::AddAsync(AddRequest request, Callback<AddResult> done) {
  absl::Status valid = ValidateKeyInNamespace(request.ns, request.key, options_.limits);
  if (!valid.ok()) return done(valid);
  PendingWrite write;
  write.op = std::move(request);
  write.done = Adapt<AddResult>(std::move(done), [](WriteOutcome o) {
    return AddResult{o.number, o.revision};
  });
  Enqueue(std::move(write));
}

void KvStore::LeaseGrantAsync(LeaseGrantRequest request, Callback<LeaseGrantResult> done) {
  absl::Status valid = ValidateLeaseTtl(request.ttl_ms, options_.limits);
  if (valid.ok() && !request.owner.empty())
    valid = ValidateNamespace(request.owner, options_.limits);
  if (!valid.ok()) return done(valid);
  PendingWrite write;
  write.op = LeaseGrantOp{request.ttl_ms, std::move(request.owner)};
  write.done = Adapt<LeaseGrantResult>(std::move(done), [](WriteOutcome o) {
    return LeaseGrantResult{o.lease, o.ttl_ms};
  });
  Enqueue(std::move(write));
}

void KvStore::LeaseRevokeAsync(LeaseId lease, const LeaseCaller& caller,
                               Callback<LeaseRevokeResult> done) {
  if (absl::Status s = ValidateLeaseId(lease); !s.ok()) return done(s);
  PendingWrite write;
  write.op = LeaseRevokeOp{lease, /*expired=*/false, caller};
  write.done = Adapt<LeaseRevokeResult>(std::move(done), [](WriteOutcome o) {
    return LeaseRevokeResult{o.deleted, o.revision};
  });
  Enqueue(std::move(write));
}

void KvStore::CompactAsync(Revision revision, Callback<CompactResult> done) {
  if (revision <= 0) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("compact revision ", revision, " is invalid; give a positive revision")));
  }
  PendingWrite write;
  write.compact_to = revision;
  write.done = Adapt<CompactResult>(std::move(done),
                                    [](WriteOutcome o) { return CompactResult{o.revision}; });
  Enqueue(std::move(write));
}

void KvStore::WaitAsync(WaitRequest request, Callback<WaitResult> done) {
  absl::Status valid = ValidateNamespace(request.ns, options_.limits);
  if (valid.ok()) valid = ValidateWaitKeyCount(request.keys.size(), options_.limits);
  for (size_t i = 0; valid.ok() && i < request.keys.size(); ++i) {
    valid = ValidateKey(request.keys[i], options_.limits);
  }
  absl::StatusOr<absl::Duration> timeout = ResolveWaitTimeout(request.timeout_ms, options_.limits);
  if (valid.ok() && !timeout.ok()) valid = timeout.status();
  if (!valid.ok()) return done(valid);

  absl::Status registered;
  Revision revision = 0;
  {
    absl::MutexLock lock(&state_mu_);
    revision = revision_;
    std::vector<std::string> missing;
    for (std::string& key : request.keys) {
      if (keys_.Find(request.ns, key) == nullptr) missing.push_back(std::move(key));
    }
    if (missing.empty()) {
      registered = absl::OkStatus();
    } else if (waits_closed_) {
      registered = absl::UnavailableError("the coordinator is shutting down; retry");
    } else {
      auto on_finish = [this, done](absl::Status status) {
        if (!status.ok()) return done(status);
        done(WaitResult{hub_.published_revision()});
      };
      registered = waits_.Add(request.ns, std::move(missing), clock_.Now() + *timeout, *timeout,
                              std::move(on_finish), options_.limits.max_pending_wait_calls);
      if (registered.ok()) return;  // `done` runs when the keys appear or time runs out
    }
  }
  if (!registered.ok()) return done(registered);
  done(WaitResult{revision});
}

absl::StatusOr<PutResult> KvStore::Put(PutRequest request) {
  return RunSync<PutResult>([&](Callback<PutResult> cb) { PutAsync(std::move(request), cb); });
}
absl::StatusOr<DeleteResult> KvStore::Delete(DeleteRequest request) {
  return RunSync<DeleteResult>(
      [&](Callback<DeleteResult> cb) { DeleteAsync(std::move(request), cb); });
}
absl::StatusOr<CompareAndSetResult> KvStore::CompareAndSet(CompareAndSetRequest request) {
  return RunSync<CompareAndSetResult>(
      [&](Callback<CompareAndSetResult> cb) { CompareAndSetAsync(std::move(request), cb); });
}
absl::StatusOr<AddResult> KvStore::Add(AddRequest request) {
  return RunSync<AddResult>([&](Callback<AddResult> cb) { AddAsync(std::move(request), cb); });
}
absl::StatusOr<LeaseGrantResult> KvStore::LeaseGrant(int64_t ttl_ms, std::string owner) {
  return RunSync<LeaseGrantResult>([&](Callback<LeaseGrantResult> cb) {
    LeaseGrantAsync({ttl_ms, std::move(owner)}, cb);
  });
}
absl::StatusOr<LeaseRevokeResult> KvStore::LeaseRevoke(LeaseId lease, const LeaseCaller& caller) {
  return RunSync<LeaseRevokeResult>(
      [&](Callback<LeaseRevokeResult> cb) { LeaseRevokeAsync(lease, caller, cb); });
}
absl::StatusOr<CompactResult> KvStore::Compact(Revision revision) {
  return RunSync<CompactResult>([&](Callback<CompactResult> cb) { CompactAsync(revision, cb); });
}
absl::StatusOr<WaitResult> KvStore::Wait(WaitRequest request) {
  return RunSync<WaitResult>([&](Callback<WaitResult> cb) { WaitAsync(std::move(request), cb); });
}

}  // namespace ddp::kv
