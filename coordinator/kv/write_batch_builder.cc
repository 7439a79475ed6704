#include "coordinator/kv/write_batch_builder.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/kv/kv_validation.h"

namespace ddp::kv {
namespace {

absl::Status LeaseNotFound(LeaseId id) {
  return absl::NotFoundError(absl::StrCat(
      "lease ", id, " does not exist (expired or revoked); grant a new lease and retry"));
}

}  // namespace

// Draws of the id source before a grant gives up: with random 63-bit ids a
// second draw is already a 1 in 2^63 event; only a broken source gets here.
constexpr int kLeaseIdDraws = 64;

WriteBatchBuilder::WriteBatchBuilder(const KeySpace& keys, const LeaseTable& leases,
                                     Revision revision, const LeaseIdSource& new_lease_id,
                                     size_t max_leases, size_t expected_writes)
    : keys_(keys),
      leases_(leases),
      base_revision_(revision),
      new_lease_id_(new_lease_id),
      max_leases_(max_leases),
      revision_(revision) {
  overlay_.reserve(expected_writes);
  events_.reserve(expected_writes);
}

const KeyValue* WriteBatchBuilder::Lookup(const std::string& ns, const std::string& key) const {
  if (!overlay_.empty()) {
    auto it = overlay_.find(KeyRef(ns, key));
    if (it != overlay_.end()) {
      const Event& latest = events_[it->second];
      return latest.type == EventType::kPut ? &latest.kv : nullptr;
    }
  }
  return keys_.Find(ns, key);
}

bool WriteBatchBuilder::LeaseExists(LeaseId id) const {
  if (revoked_.contains(id)) return false;
  return granted_.contains(id) || leases_.Contains(id);
}

const std::string& WriteBatchBuilder::LeaseOwner(LeaseId id) const {
  auto it = granted_.find(id);
  return it != granted_.end() ? it->second.owner : leases_.Owner(id);
}

void WriteBatchBuilder::SetKey(KeyValue kv) {
  overlay_[KeyRef(kv.ns, kv.key)] = events_.size();
  events_.push_back(Event{EventType::kPut, std::move(kv)});
}

void WriteBatchBuilder::DeleteKey(const std::string& ns, const std::string& key,
                                  Revision revision) {
  overlay_[KeyRef(ns, key)] = events_.size();
  Event event;
  event.type = EventType::kDelete;
  event.kv.ns = ns;
  event.kv.key = key;
  event.kv.mod_revision = revision;
  events_.push_back(std::move(event));
}

Revision WriteBatchBuilder::WriteValue(const std::string& ns, const std::string& key,
                                       std::string value, const KeyValue* current) {
  const Revision revision = ++revision_;
  KeyValue kv;
  kv.ns = ns;
  kv.key = key;
  kv.value = std::move(value);
  kv.create_revision = current ? current->create_revision : revision;
  kv.mod_revision = revision;
  kv.version = current ? current->version + 1 : 1;
  kv.lease = current ? current->lease : 0;
  SetKey(std::move(kv));
  return revision;
}

absl::StatusOr<WriteOutcome> WriteBatchBuilder::Apply(const WriteOp& op) {
  WriteOp copy = op;
  return Apply(std::move(copy));
}

absl::StatusOr<WriteOutcome> WriteBatchBuilder::Apply(WriteOp&& op) {
  if (built_) {
    return absl::FailedPreconditionError(
        "WriteBatchBuilder::Apply after Build; start a new builder");
  }
  return std::visit(
      [this](auto& request) -> absl::StatusOr<WriteOutcome> {
        using T = std::decay_t<decltype(request)>;
        if constexpr (std::is_same_v<T, PutRequest>) return ApplyPut(request);
        if constexpr (std::is_same_v<T, DeleteRequest>) return ApplyDelete(request);
        if constexpr (std::is_same_v<T, CompareAndSetRequest>) {
          return ApplyCompareAndSet(request);
        }
        if constexpr (std::is_same_v<T, AddRequest>) return ApplyAdd(request);
        if constexpr (std::is_same_v<T, LeaseGrantOp>) return ApplyLeaseGrant(request);
        if constexpr (std::is_same_v<T, LeaseRevokeOp>) return ApplyLeaseRevoke(request);
      },
      op);
}

absl::StatusOr<WriteOutcome> WriteBatchBuilder::ApplyPut(PutRequest& op) {
  if (op.lease != 0) {
    if (!LeaseExists(op.lease)) return LeaseNotFound(op.lease);
    if (absl::Status allowed =
            CheckLeaseCaller(op.lease, LeaseOwner(op.lease), op.lease_caller, "attach keys to");
        !allowed.ok()) {
      return allowed;
    }
  }
  const KeyValue* current = Lookup(op.ns, op.key);
  if (op.condition == PutRequest::Condition::kAbsent && current != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "key '", AbbreviateForMessage(op.key), "' in namespace '", op.ns,
        "' already exists (mod_revision ", current->mod_revision, "); the put required absence"));
  }
  if (op.condition == PutRequest::Condition::kExpectedModRevision) {
    const Revision actual = current ? current->mod_revision : 0;
    if (actual != op.expected_mod_revision) {
      return absl::FailedPreconditionError(
          absl::StrCat("key '", AbbreviateForMessage(op.key), "' in namespace '", op.ns,
                       "' has mod_revision ", actual, " (0 = absent), the put expected ",
                       op.expected_mod_revision, "; read it again and retry"));
    }
  }
  WriteOutcome outcome;
  if (op.return_previous && current != nullptr) outcome.previous = *current;
  const Revision revision = ++revision_;
  KeyValue kv;
  kv.ns = std::move(op.ns);
  kv.key = std::move(op.key);
  kv.value = std::move(op.value);
  kv.create_revision = current ? current->create_revision : revision;
  kv.mod_revision = revision;
  kv.version = current ? current->version + 1 : 1;
  kv.lease = op.lease;
  SetKey(std::move(kv));
  outcome.revision = revision;
  return outcome;
}

absl::StatusOr<WriteOutcome> WriteBatchBuilder::ApplyDelete(const DeleteRequest& op) {
  std::vector<std::string> doomed;
  if (!op.prefix) {
    if (Lookup(op.ns, op.key) != nullptr) doomed.push_back(op.key);
  } else {
    keys_.Scan(op.ns, op.key, "", [&](const KeyValue& kv) {
      if (!overlay_.contains(KeyRef(kv.ns, kv.key))) doomed.push_back(kv.key);
      return true;
    });
    for (const auto& [ref, index] : overlay_) {
      if (events_[index].type == EventType::kPut && ref.first == op.ns &&
          absl::StartsWith(ref.second, op.key)) {
        doomed.push_back(ref.second);
      }
    }
    std::sort(doomed.begin(), doomed.end());
  }
  WriteOutcome outcome;
  if (doomed.empty()) {
    outcome.revision = revision_;
    return outcome;
  }
  const Revision revision = ++revision_;
  for (const std::string& key : doomed) DeleteKey(op.ns, key, revision);
  outcome.deleted = static_cast<int64_t>(doomed.size());
  outcome.revision = revision;
  return outcome;
}

absl::StatusOr<WriteOutcome> WriteBatchBuilder::ApplyCompareAndSet(const CompareAndSetRequest& op) {
  const KeyValue* current = Lookup(op.ns, op.key);
  const bool matches = current ? current->value == op.expected : op.expected.empty();
  WriteOutcome outcome;
  if (!matches) {
    outcome.value = current ? current->value : "";
    outcome.revision = revision_;
    return outcome;
  }
  outcome.revision = WriteValue(op.ns, op.key, op.desired, current);
  outcome.value = op.desired;
  outcome.swapped = true;
  return outcome;
}

absl::StatusOr<WriteOutcome> WriteBatchBuilder::ApplyAdd(const AddRequest& op) {
  const KeyValue* current = Lookup(op.ns, op.key);
  int64_t value = 0;
  if (current != nullptr && !absl::SimpleAtoi(current->value, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key '", AbbreviateForMessage(op.key), "' in namespace '", op.ns, "' holds '",
        AbbreviateForMessage(current->value), "', not a decimal int64; add needs an integer"));
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(value, op.delta, &sum)) {
    return absl::OutOfRangeError(absl::StrCat("add of ", op.delta, " to ", value, " for key '",
                                              AbbreviateForMessage(op.key), "' overflows int64"));
  }
  WriteOutcome outcome;
  outcome.revision = WriteValue(op.ns, op.key, absl::StrCat(sum), current);
  outcome.number = sum;
  return outcome;
}

absl::StatusOr<WriteOutcome> WriteBatchBuilder::ApplyLeaseGrant(const LeaseGrantOp& op) {
  if (leases_.size() + granted_.size() >= max_leases_ + revoked_.size()) {
    return absl::ResourceExhaustedError(absl::StrCat("too many leases (limit ", max_leases_,
                                                     "); revoke leases that are no longer used"));
  }
  LeaseId id = 0;
  for (int draw = 0; draw < kLeaseIdDraws && id == 0; ++draw) {
    const LeaseId candidate = new_lease_id_();
    // A revoked id stays out of this batch: its revoke and the new grant
    // would name one row.
    if (candidate > 0 && !LeaseExists(candidate) && !revoked_.contains(candidate)) id = candidate;
  }
  if (id == 0) {
    return absl::InternalError(absl::StrCat("no free lease id after ", kLeaseIdDraws,
                                            " draws; the lease id source is broken"));
  }
  WriteOutcome outcome;
  outcome.lease = id;
  outcome.ttl_ms = op.ttl_ms;
  granted_[id] = Granted{op.ttl_ms, op.owner};
  outcome.revision = ++revision_;
  if (!op.owner.empty()) {
    // The owner key, attached to the lease: durable with the grant, deleted
    // with the lease.
    KeyValue owner;
    owner.ns = kLeaseOwnerNamespace;
    owner.key = LeaseOwnerKey(id);
    owner.value = op.owner;
    owner.create_revision = outcome.revision;
    owner.mod_revision = outcome.revision;
    owner.version = 1;
    owner.lease = id;
    SetKey(std::move(owner));
  }
  return outcome;
}

absl::StatusOr<WriteOutcome> WriteBatchBuilder::ApplyLeaseRevoke(const LeaseRevokeOp& op) {
  WriteOutcome outcome;
  if (!LeaseExists(op.lease)) {
    if (op.expired) {
      outcome.revision = revision_;
      return outcome;
    }
    return LeaseNotFound(op.lease);
  }
  if (absl::Status allowed = CheckLeaseCaller(op.lease, LeaseOwner(op.lease), op.caller, "revoke");
      !allowed.ok()) {
    return allowed;
  }
  std::vector<KeyRef> doomed;
  for (const KeyRef& ref : leases_.Keys(op.lease)) {
    const KeyValue* kv = Lookup(ref.first, ref.second);
    if (kv != nullptr && kv->lease == op.lease && !overlay_.contains(ref)) doomed.push_back(ref);
  }
  for (const auto& [ref, index] : overlay_) {
    const Event& latest = events_[index];
    if (latest.type == EventType::kPut && latest.kv.lease == op.lease) {
      doomed.push_back(ref);
    }
  }
  std::sort(doomed.begin(), doomed.end());
  const Revision revision = ++revision_;
  int64_t deleted = 0;
  for (const KeyRef& ref : doomed) {
    DeleteKey(ref.first, ref.second, revision);
    if (ref.first != kLeaseOwnerNamespace) ++deleted;  // the caller's keys only
  }
  if (granted_.erase(op.lease) == 0) revoked_.insert(op.lease);
  outcome.deleted = deleted;
  outcome.revision = revision;
  return outcome;
}

KvWriteBatch WriteBatchBuilder::Build() {
  KvWriteBatch batch;
  batch.revision = revision_;
  batch.upserts.reserve(overlay_.size());
  for (const auto& [ref, index] : overlay_) {
    const Event& latest = events_[index];
    if (latest.type == EventType::kPut) {
      batch.upserts.push_back(latest.kv);
    } else if (keys_.Find(ref.first, ref.second) != nullptr) {
      batch.deletes.push_back(ref);
    }
  }
  batch.events = std::move(events_);
  events_.clear();
  built_ = true;
  for (const auto& [id, granted] : granted_) batch.lease_grants.push_back({id, granted.ttl_ms});
  batch.lease_revokes.assign(revoked_.begin(), revoked_.end());
  // Ids are random: the stored next_lease_id of earlier releases stays as it
  // was (batch.next_lease_id 0: unchanged).
  return batch;
}

void WriteBatchBuilder::ApplyTo(KvWriteBatch& committed, KeySpace& keys, LeaseTable& leases,
                                absl::Time now) const {
  for (const auto& [id, granted] : granted_) leases.Grant(id, granted.ttl_ms, granted.owner, now);
  for (KeyValue& kv : committed.upserts) {
    const KeyValue* stored = nullptr;
    const LeaseId old_lease = keys.Upsert(std::move(kv), &stored);
    if (old_lease != 0) leases.DetachKey(old_lease, stored->ns, stored->key);
    if (stored->lease != 0) {
      leases.AttachKey(stored->lease, stored->ns, stored->key);
    }
  }
  committed.upserts.clear();
  for (const auto& [ns, key] : committed.deletes) {
    LeaseId old_lease = 0;
    if (keys.Erase(ns, key, &old_lease) && old_lease != 0) {
      leases.DetachKey(old_lease, ns, key);
    }
  }
  for (LeaseId id : revoked_) leases.Remove(id);
}

}  // namespace ddp::kv
