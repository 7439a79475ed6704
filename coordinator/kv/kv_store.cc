#include "coordinator/kv/kv_store.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/kv/kv_validation.h"
#include "coordinator/kv/published_events.h"

namespace ddp::kv {
namespace {

// KvLimits::max_watchers is the one knob for the watcher count.
WatchHubOptions HubOptions(const KvStoreOptions& options) {
  WatchHubOptions hub = options.watch;
  hub.max_watchers = options.limits.max_watchers;
  hub.max_event_bytes = options.limits.max_namespace_bytes + options.limits.max_key_bytes +
                        options.limits.max_value_bytes + PublishedEvents::kFixedEventBytes;
  return hub;
}

absl::Status ShuttingDown() {
  return absl::UnavailableError("the coordinator is shutting down; retry against the new one");
}

// The fail-stop status as one refused write gets it: that write, at least,
// was not applied (readiness shows the failure without this).
absl::Status NoEffect(const absl::Status& failure) {
  return absl::Status(failure.code(),
                      absl::StrCat(failure.message(), "; this write had no effect"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvStore>> KvStore::Open(KvBackend& backend,
                                                       KvCommitPipeline& pipeline,
                                                       const Clock& clock, KvStoreOptions options) {
  std::unique_ptr<KvStore> store(new KvStore(backend, pipeline, clock, std::move(options)));
  DDP_RETURN_IF_ERROR(store->LoadState());
  return store;
}

KvStore::KvStore(KvBackend& backend, KvCommitPipeline& pipeline, const Clock& clock,
                 KvStoreOptions options)
    : backend_(backend),
      pipeline_(pipeline),
      clock_(clock),
      options_(std::move(options)),
      lease_ids_(options_.lease_ids ? options_.lease_ids : LeaseIdSource(&RandomLeaseId)),
      hub_(backend_, HubOptions(options_)),
      notifier_(std::max(1, options_.notify_threads), options_.notify_parallel_min) {}

KvStore::~KvStore() { Shutdown(); }

absl::Status KvStore::LoadState() {
  const absl::Time started = clock_.Now();
  DDP_ASSIGN_OR_RETURN(PersistedKvState state, backend_.Load());
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&state_mu_);
  // The keys are taken whole; only the leases and their keys are looked at.
  keys_ = std::move(state.keys);
  for (const LeaseRecord& lease : state.leases) leases_.Grant(lease.id, lease.ttl_ms, "", now);
  keys_.ForEachLeased([&](const KeyValue& kv) {
    if (leases_.Contains(kv.lease)) {
      leases_.AttachKey(kv.lease, kv.ns, kv.key);
    } else {
      DDP_LOG(WARNING) << "key '" << AbbreviateForMessage(kv.key) << "' in namespace '" << kv.ns
                       << "' names missing lease " << kv.lease << "; kept";
    }
  });
  absl::flat_hash_map<LeaseId, std::string> owners;
  keys_.Scan(std::string(kLeaseOwnerNamespace), "", "", [&](const KeyValue& kv) {
    if (std::optional<LeaseId> id = LeaseIdOfOwnerKey(kv.key)) owners[*id] = kv.value;
    return true;
  });
  LoadLeaseOwnersLocked(owners);
  revision_ = state.revision;
  compacted_revision_ = state.compacted_revision;
  hub_.SetPublishedRevision(revision_);
  DDP_LOG(INFO) << "kv store loaded: revision " << revision_ << ", compacted "
                << compacted_revision_ << ", " << keys_.size() << " keys, " << leases_.size()
                << " leases; read in " << absl::FormatDuration(now - started) << ", taken in "
                << absl::FormatDuration(clock_.Now() - now);
  return absl::OkStatus();
}

void KvStore::LoadLeaseOwnersLocked(const absl::flat_hash_map<LeaseId, std::string>& recorded) {
  size_t inferred = 0, ownerless = 0;
  for (const auto& [id, owner] : recorded) leases_.SetOwner(id, owner);
  leases_.ForEach([&](LeaseId id) {
    if (recorded.contains(id)) return;
    // Granted before leases had owners: the namespace of its keys, if one.
    std::string owner;
    bool one_namespace = true;
    for (const auto& [ns, key] : leases_.Keys(id)) {
      if (owner.empty()) owner = ns;
      one_namespace = one_namespace && ns == owner;
    }
    if (one_namespace && !owner.empty()) {
      leases_.SetOwner(id, owner);
      ++inferred;
    } else {
      ++ownerless;
    }
  });
  if (inferred + ownerless > 0) {
    DDP_LOG(INFO) << inferred + ownerless << " leases have no owner record (granted by the admin "
                  << "without a namespace, or before leases had owners): " << inferred
                  << " belong to the one namespace of their keys, " << ownerless
                  << " to no job (admin token only)";
  }
}

void KvStore::Shutdown() {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  {
    absl::MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  // What is queued is committed and its callbacks run.
  pipeline_.Flush();
  hub_.CancelAll(
      absl::UnavailableError("the coordinator is shutting down; watch again "
                             "from the last revision seen + 1"));
  WaitRegistry::Finished finished;
  {
    absl::MutexLock lock(&state_mu_);
    waits_closed_ = true;
    waits_.CancelAll(ShuttingDown(), &finished);
  }
  for (auto& [done, status] : finished) done(status);
}

void KvStore::Enqueue(PendingWrite write) {
  absl::Status refused;
  {
    absl::MutexLock lock(&queue_mu_);
    if (stopping_) {
      refused = ShuttingDown();
    } else if (!write_failure_.ok()) {
      refused = NoEffect(write_failure_);
    } else if (queue_.size() >= options_.max_pending_writes) {
      refused = absl::UnavailableError(absl::StrCat("the write queue is full (",
                                                    options_.max_pending_writes,
                                                    " writes); retry with backoff"));
    } else {
      queue_.push_back(std::move(write));
      if (queue_.size() > 1) return;  // the loop was told of the first one
    }
  }
  if (refused.ok()) {
    pipeline_.Notify();
    return;
  }
  write.done(refused);
}

std::vector<KvStore::PendingWrite> KvStore::SpareBatch() {
  absl::MutexLock lock(&spare_mu_);
  if (spare_batches_.empty()) return {};
  std::vector<PendingWrite> spare = std::move(spare_batches_.back());
  spare_batches_.pop_back();
  return spare;
}

bool KvStore::PrepareCommit(std::optional<KvWriteBatch>& kv) {
  // A vector with capacity from the delivery thread; kept over passes with
  // nothing to write (most passes when only jobs change).
  if (batch_.capacity() == 0) batch_ = SpareBatch();
  bool more = false;
  {
    absl::MutexLock lock(&queue_mu_);
    if (queue_.empty()) return false;
    if (queue_.size() <= options_.max_batch_writes) {
      batch_.swap(queue_);  // the queue keeps the spare's capacity
    } else {
      auto end = queue_.begin() + options_.max_batch_writes;
      batch_.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(end));
      queue_.erase(queue_.begin(), end);
      more = true;
    }
  }
  absl::ReaderMutexLock lock(&state_mu_);
  builder_.emplace(keys_, leases_, revision_, lease_ids_, options_.limits.max_leases,
                   batch_.size());
  for (PendingWrite& write : batch_) {
    if (write.compact_to == 0) write.result = builder_->Apply(std::move(write.op));
  }
  if (!builder_->empty()) kv = builder_->Build();
  return more;
}

void KvStore::FinishCommit(const absl::Status& status, bool batch_ran,
                           std::optional<KvWriteBatch>& kv, KvSends& sends) {
  if (batch_ran) {  // a commit ran (KV writes, job changes or both)
    absl::MutexLock lock(&queue_mu_);
    last_commit_failure_ = status;
    if (!status.ok()) last_commit_failure_at_ = clock_.Now();
  }
  if (batch_.empty()) return;
  auto delivery = std::make_shared<Delivery>();
  absl::Status commit_status;
  if (kv) {
    KvWriteBatch& committed = *kv;
    if (status.ok()) {
      {
        absl::MutexLock lock(&state_mu_);
        builder_->ApplyTo(committed, keys_, leases_, clock_.Now());
        revision_ = builder_->revision();
        if (waits_.size() != 0) {
          for (const Event& event : committed.events) {
            if (event.type == EventType::kPut)
              waits_.OnKeyPut(event.kv.ns, event.kv.key, &delivery->waits);
          }
        }
      }
      // The batch's own copy of the events goes to the watchers (no copy).
      hub_.Publish(std::move(committed.events), builder_->revision(), &delivery->ready);
    } else {
      commit_status = CommitFailure(status, batch_.size());
    }
  }
  builder_.reset();
  for (PendingWrite& write : batch_) {
    if (write.compact_to > 0) {
      Revision compacted = 0;
      absl::Status compaction = RunCompaction(write.compact_to, &compacted);
      WriteOutcome outcome;
      outcome.revision = compacted;
      write.result = compaction.ok() ? absl::StatusOr<WriteOutcome>(outcome) : compaction;
    } else if (!commit_status.ok()) {
      write.result = commit_status;
    }
  }
  delivery->writes = std::move(batch_);
  batch_ = {};
  sends.push_back([this, delivery] { Deliver(*delivery); });
  MaybeRetainHistory();
}

absl::Status KvStore::CommitFailure(const absl::Status& cause, size_t writes) {
  DDP_LOG(ERROR) << "group commit of " << writes << " writes failed: " << cause;
  if (cause.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(absl::StrCat("storage commit failed (", cause.message(),
                                               "); the write had no effect; retry later"));
  }
  // The outcome is unknown, or the backend refuses writes: stop all writes
  // until a restart recovers the file (an fsync error is not retryable).
  Revision last;
  {
    absl::ReaderMutexLock lock(&state_mu_);
    last = revision_;
  }
  {
    absl::MutexLock lock(&queue_mu_);
    if (write_failure_.ok()) {
      write_failure_ = absl::UnavailableError(absl::StrCat(
          "the coordinator's storage failed after revision ", last,
          " and accepts no writes until the coordinator is restarted (", cause.message(), ")"));
      DDP_LOG(ERROR) << "storage failed: refusing every write until restarted; "
                        "reads keep serving what was acknowledged";
    }
  }
  if (cause.code() == absl::StatusCode::kUnknown) {
    return absl::UnknownError(absl::StrCat(
        "the outcome of this write is unknown: the storage failed while committing it (",
        cause.message(),
        "). It may or may not have been applied: read the key before retrying an Add, "
        "CompareAndSet or create-only Put. The coordinator accepts no writes until "
        "it is restarted"));
  }
  absl::MutexLock lock(&queue_mu_);
  // The backend refused this batch before writing it.
  return NoEffect(write_failure_);
}

void KvStore::Deliver(Delivery& delivery) {
  notifier_.NotifyAll(delivery.ready);
  for (auto& [done, status] : delivery.waits) done(status);
  // The replies on the notifier's threads too: one batch's writes were
  // committed together, and two threads sending replies to one connection
  // at once leave in fewer socket writes (see sink_notifier.h).
  notifier_.ForEach(delivery.writes.size(), [&delivery](size_t i) {
    PendingWrite& write = delivery.writes[i];
    write.done(std::move(write.result));
  });
  delivery.writes.clear();  // keeps the capacity for the commit thread
  absl::MutexLock lock(&spare_mu_);
  if (spare_batches_.size() < 4) spare_batches_.push_back(std::move(delivery.writes));
}

absl::Status KvStore::RunCompaction(Revision compact_to, Revision* compacted) {
  Revision current = 0, already = 0;
  {
    absl::ReaderMutexLock lock(&state_mu_);
    current = revision_;
    already = compacted_revision_;
  }
  if (compact_to > current + 1) {
    return absl::OutOfRangeError(absl::StrCat("cannot compact to revision ", compact_to,
                                              ": the current revision is ", current));
  }
  const Revision target = compact_to - 1;  // history below compact_to goes
  if (target <= already) {
    *compacted = already;
    return absl::OkStatus();
  }
  absl::Status status = backend_.Compact(target);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("compaction failed (", status.message(), ")"));
  }
  absl::MutexLock lock(&state_mu_);
  compacted_revision_ = target;
  *compacted = target;
  return absl::OkStatus();
}

void KvStore::MaybeRetainHistory() {
  if (options_.history_revisions <= 0) return;
  Revision current = 0, compacted = 0;
  {
    absl::ReaderMutexLock lock(&state_mu_);
    current = revision_;
    compacted = compacted_revision_;
  }
  // Compact in steps of a tenth of the retention, not after every batch.
  const Revision slack = std::max<Revision>(1, options_.history_revisions / 10);
  if (current - compacted < options_.history_revisions + slack) return;
  Revision done = 0;
  absl::Status status = RunCompaction(current - options_.history_revisions + 1, &done);
  if (!status.ok()) DDP_LOG_EVERY_N_SEC(WARNING, 10) << "history retention: " << status;
}

void KvStore::Tick() {
  const absl::Time now = clock_.Now();
  std::vector<LeaseId> expired;
  WaitRegistry::Finished finished;
  {
    absl::MutexLock lock(&state_mu_);
    expired = leases_.CollectExpired(now);
    waits_.Expire(now, &finished);
  }
  for (LeaseId id : expired) {
    DDP_LOG(DEBUG) << "lease " << id << " expired; deleting its keys";
    PendingWrite write;
    write.op = LeaseRevokeOp{id, /*expired=*/true};
    write.done = [this, id](absl::StatusOr<WriteOutcome> result) {
      if (result.ok()) return;
      // Retried at every tick while the storage refuses writes: rate-limited.
      DDP_LOG_EVERY_N_SEC(WARNING, 10)
          << "revoking expired lease " << id << " failed: " << result.status();
      absl::MutexLock lock(&state_mu_);
      leases_.ClearExpiring(id, clock_.Now());  // retried at a later tick
    };
    Enqueue(std::move(write));
  }
  for (auto& [done, status] : finished) done(status);
}

absl::StatusOr<GetResult> KvStore::Get(const GetRequest& request) const {
  if (absl::Status s = ValidateNamespace(request.ns, options_.limits); !s.ok()) return s;
  if (absl::Status s = ValidateKey(request.key, options_.limits); !s.ok()) return s;
  if (request.revision < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("revision ", request.revision,
                     " is negative: give 0 for the current value, or a revision of the store"));
  }
  absl::StatusOr<GetResult> result;
  if (request.revision > 0) {
    result = GetAtRevision(request);
  } else {
    absl::ReaderMutexLock lock(&state_mu_);
    const KeyValue* kv = keys_.Find(request.ns, request.key);
    if (kv == nullptr) {
      result = absl::NotFoundError(absl::StrCat("key '", AbbreviateForMessage(request.key),
                                                "' not found in namespace '", request.ns, "'"));
    } else {
      result = GetResult{*kv, revision_};
    }
  }
  // Checked after the read: what was read was current while still leading.
  if (options_.read_check) DDP_RETURN_IF_ERROR(options_.read_check());
  return result;
}

absl::StatusOr<GetResult> KvStore::GetAtRevision(const GetRequest& request) const {
  const Revision at = request.revision;
  std::optional<KeyValue> current;
  Revision now = 0, compacted = 0;
  {
    absl::ReaderMutexLock lock(&state_mu_);
    if (const KeyValue* kv = keys_.Find(request.ns, request.key)) current = *kv;
    now = revision_;
    compacted = compacted_revision_;
  }
  const std::string key = AbbreviateForMessage(request.key);
  if (at > now) {
    return absl::OutOfRangeError(
        absl::StrCat("revision ", at, " is in the future: the store is at revision ", now));
  }
  if (at < compacted) {
    return absl::OutOfRangeError(absl::StrCat(
        "revision ", at, " is compacted: history is kept from revision ", compacted, " on"));
  }
  // The key's last change at or before `at`, and its first change after it,
  // among the changes after the compacted revision. One key changes at most
  // once a revision; a page that one revision filled is read again, larger.
  std::optional<Event> last_before, first_after;
  Revision from = compacted + 1, last_seen = compacted;
  size_t page = 1024;
  while (!first_after.has_value()) {
    absl::StatusOr<std::vector<Event>> events =
        backend_.ReadEvents(request.ns, request.key, from, page);
    if (absl::IsOutOfRange(events.status())) {
      return absl::OutOfRangeError(
          absl::StrCat("revision ", at, " was compacted while it was read; read a later one"));
    }
    if (!events.ok()) return events.status();
    for (Event& event : *events) {
      if (event.kv.key != request.key || event.revision() <= last_seen) continue;
      last_seen = event.revision();
      if (event.revision() <= at) {
        last_before = std::move(event);
      } else {
        first_after = std::move(event);
        break;
      }
    }
    if (events->size() < page) break;
    if (events->front().revision() == events->back().revision()) {
      page *= 2;
    } else {
      from = events->back().revision();
    }
  }
  auto absent = [&](absl::string_view why) {
    return absl::NotFoundError(absl::StrCat("key '", key, "' did not exist at revision ", at,
                                            " in namespace '", request.ns, "'", why));
  };
  if (last_before.has_value()) {
    if (last_before->type == EventType::kDelete) {
      return absent(absl::StrCat(" (deleted at revision ", last_before->revision(), ")"));
    }
    return GetResult{std::move(last_before->kv), now};
  }
  // Unchanged between the compacted revision and `at`.
  if (!first_after.has_value()) {
    if (!current.has_value()) return absent("");
    return GetResult{*std::move(current), now};
  }
  if (first_after->type == EventType::kPut &&
      first_after->kv.create_revision == first_after->revision()) {
    return absent(absl::StrCat(" (created at revision ", first_after->revision(), ")"));
  }
  return absl::OutOfRangeError(
      absl::StrCat("the value key '", key, "' had at revision ", at,
                   " was written at or before the compacted revision ", compacted,
                   " and is no longer kept (the key changed at revision ", first_after->revision(),
                   "): read at revision ", first_after->revision(), " or later"));
}

absl::StatusOr<RangeResult> KvStore::Range(const RangeRequest& request) const {
  if (absl::Status s = ValidateNamespace(request.ns, options_.limits); !s.ok()) return s;
  if (absl::Status s = ValidatePrefix(request.prefix, options_.limits); !s.ok()) return s;
  if (absl::Status s = ValidatePrefix(request.start_after, options_.limits); !s.ok()) return s;
  DDP_ASSIGN_OR_RETURN(size_t limit, ResolveRangeLimit(request.limit, options_.limits));
  RangeResult result;
  {
    absl::ReaderMutexLock lock(&state_mu_);
    keys_.Scan(request.ns, request.prefix, request.start_after, [&](const KeyValue& kv) {
      if (result.kvs.size() == limit) {
        result.more = true;
        return false;
      }
      result.kvs.push_back(kv);
      if (request.keys_only) result.kvs.back().value.clear();
      return true;
    });
    if (result.more) result.next_start_after = result.kvs.back().key;
    result.revision = revision_;
  }
  if (options_.read_check) DDP_RETURN_IF_ERROR(options_.read_check());
  return result;
}

absl::StatusOr<LeaseKeepAliveResult> KvStore::LeaseKeepAlive(LeaseId lease,
                                                             const LeaseCaller& caller) {
  if (absl::Status s = ValidateLeaseId(lease); !s.ok()) return s;
  absl::MutexLock lock(&state_mu_);
  DDP_ASSIGN_OR_RETURN(int64_t ttl, leases_.KeepAlive(lease, caller, clock_.Now()));
  return LeaseKeepAliveResult{lease, ttl};
}

std::vector<LeaseId> KvStore::LeaseList(const LeaseCaller& caller) const {
  absl::ReaderMutexLock lock(&state_mu_);
  return leases_.IdsFor(caller);
}

absl::StatusOr<LeaseTimeToLiveResult> KvStore::LeaseTimeToLive(LeaseId lease, bool with_keys,
                                                               const LeaseCaller& caller) const {
  if (absl::Status s = ValidateLeaseId(lease); !s.ok()) return s;
  absl::ReaderMutexLock lock(&state_mu_);
  DDP_ASSIGN_OR_RETURN(LeaseTable::TimeToLive left, leases_.TimeLeft(lease, caller, clock_.Now()));
  LeaseTimeToLiveResult result{lease, left.remaining_ms, left.granted_ttl_ms, {}};
  if (with_keys) {
    const LeaseTable::KeySet& keys = leases_.Keys(lease);
    result.keys.assign(keys.begin(), keys.end());
    std::sort(result.keys.begin(), result.keys.end());
  }
  return result;
}

absl::Status KvStore::FailStop() const {
  absl::MutexLock lock(&queue_mu_);
  return write_failure_;
}

absl::Status KvStore::WriteHealth() const {
  absl::MutexLock lock(&queue_mu_);
  if (!write_failure_.ok()) return write_failure_;
  if (last_commit_failure_.ok()) return absl::OkStatus();
  const absl::Duration ago = clock_.Now() - last_commit_failure_at_;
  if (ago >= options_.unhealthy_after_failed_commit) return absl::OkStatus();  // no news since
  return absl::UnavailableError(
      absl::StrCat("commits are failing: the last one, ",
                   absl::FormatDuration(absl::Trunc(ago, absl::Milliseconds(1))), " ago, failed (",
                   last_commit_failure_.message(), "); ready again once a commit succeeds"));
}

KvStoreStatus KvStore::Status() const {
  KvStoreStatus status;
  {
    absl::ReaderMutexLock lock(&state_mu_);
    status.revision = revision_;
    status.compacted_revision = compacted_revision_;
    // The owner keys of leases are not the clients' keys.
    status.keys = static_cast<int64_t>(keys_.size() - keys_.CountIn(kLeaseOwnerNamespace));
    status.leases = static_cast<int64_t>(leases_.size());
    status.pending_waits = static_cast<int64_t>(waits_.size());
  }
  status.watchers = static_cast<int64_t>(hub_.size());
  return status;
}

NamespaceList KvStore::ListNamespaces() const {
  NamespaceList list;
  absl::ReaderMutexLock lock(&state_mu_);
  list.revision = revision_;
  for (auto& [ns, keys] : keys_.Namespaces()) {
    if (ns == kLeaseOwnerNamespace) continue;
    list.namespaces.push_back({std::move(ns), static_cast<int64_t>(keys)});
  }
  return list;
}

absl::StatusOr<WatchId> KvStore::Watch(const WatchRequest& request,
                                       std::shared_ptr<WatchSink> sink) {
  if (absl::Status s = ValidateNamespace(request.ns, options_.limits); !s.ok()) return s;
  if (absl::Status s = ValidatePrefix(request.prefix, options_.limits); !s.ok()) return s;
  if (request.start_revision < 0) {
    return absl::InvalidArgumentError(absl::StrCat("start_revision ", request.start_revision,
                                                   " is negative; give 0 or a revision"));
  }
  {
    absl::ReaderMutexLock lock(&state_mu_);
    if (request.start_revision != 0 && request.start_revision <= compacted_revision_) {
      return absl::OutOfRangeError(absl::StrCat(
          "cannot watch from revision ", request.start_revision, ": history up to revision ",
          compacted_revision_, " was compacted; Range, then watch from the Range's revision + 1"));
    }
  }
  return hub_.Add(request, std::move(sink));
}

absl::Status KvStore::TakeWatchEvents(WatchId id, WatchBatch* batch) {
  return hub_.Take(id, batch);
}

void KvStore::CancelWatch(WatchId id) { hub_.Remove(id); }

}  // namespace ddp::kv
