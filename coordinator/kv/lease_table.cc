#include "coordinator/kv/lease_table.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coordinator/kv/lease_ownership.h"

namespace ddp::kv {

void LeaseTable::Grant(LeaseId id, int64_t ttl_ms, const std::string& owner, absl::Time now) {
  Remove(id);
  Lease& lease = leases_[id];
  lease.ttl_ms = ttl_ms;
  lease.owner = owner;
  lease.deadline = now + absl::Milliseconds(ttl_ms);
  by_deadline_.insert({lease.deadline, id});
}

const std::string& LeaseTable::Owner(LeaseId id) const {
  auto it = leases_.find(id);
  return it == leases_.end() ? no_owner_ : it->second.owner;
}

void LeaseTable::SetOwner(LeaseId id, const std::string& owner) {
  auto it = leases_.find(id);
  if (it != leases_.end()) it->second.owner = owner;
}

absl::StatusOr<LeaseTable::TimeToLive> LeaseTable::TimeLeft(LeaseId id, const LeaseCaller& caller,
                                                            absl::Time now) const {
  auto it = leases_.find(id);
  if (it == leases_.end() || it->second.expiring) {
    return absl::NotFoundError(
        absl::StrCat("lease ", id, " does not exist (expired or revoked); grant a new lease"));
  }
  const Lease& lease = it->second;
  if (absl::Status allowed = CheckLeaseCaller(id, lease.owner, caller, "read"); !allowed.ok()) {
    return allowed;
  }
  const int64_t remaining = absl::ToInt64Milliseconds(lease.deadline - now);
  return TimeToLive{std::max<int64_t>(0, remaining), lease.ttl_ms};
}

std::vector<LeaseId> LeaseTable::IdsFor(const LeaseCaller& caller) const {
  std::vector<LeaseId> ids;
  for (const auto& [id, lease] : leases_) {
    if (!lease.expiring && CheckLeaseCaller(id, lease.owner, caller, "list").ok()) {
      ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::StatusOr<int64_t> LeaseTable::KeepAlive(LeaseId id, const LeaseCaller& caller,
                                              absl::Time now) {
  auto it = leases_.find(id);
  if (it == leases_.end()) {
    return absl::NotFoundError(
        absl::StrCat("lease ", id, " does not exist (expired or revoked); grant a new lease"));
  }
  Lease& lease = it->second;
  if (absl::Status allowed = CheckLeaseCaller(id, lease.owner, caller, "keep alive");
      !allowed.ok()) {
    return allowed;
  }
  if (lease.expiring) {
    return absl::NotFoundError(
        absl::StrCat("lease ", id,
                     " has expired and its keys are being deleted; grant a new "
                     "lease"));
  }
  by_deadline_.erase({lease.deadline, id});
  lease.deadline = now + absl::Milliseconds(lease.ttl_ms);
  by_deadline_.insert({lease.deadline, id});
  return lease.ttl_ms;
}

void LeaseTable::Remove(LeaseId id) {
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  if (!it->second.expiring) by_deadline_.erase({it->second.deadline, id});
  leases_.erase(it);
}

void LeaseTable::AttachKey(LeaseId id, const std::string& ns, const std::string& key) {
  auto it = leases_.find(id);
  if (it != leases_.end()) it->second.keys.insert({ns, key});
}

void LeaseTable::DetachKey(LeaseId id, const std::string& ns, const std::string& key) {
  auto it = leases_.find(id);
  if (it != leases_.end()) it->second.keys.erase(KeyRef(ns, key));
}

const LeaseTable::KeySet& LeaseTable::Keys(LeaseId id) const {
  auto it = leases_.find(id);
  return it == leases_.end() ? empty_ : it->second.keys;
}

std::vector<LeaseId> LeaseTable::CollectExpired(absl::Time now) {
  std::vector<LeaseId> expired;
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
    const LeaseId id = by_deadline_.begin()->second;
    by_deadline_.erase(by_deadline_.begin());
    leases_[id].expiring = true;
    expired.push_back(id);
  }
  return expired;
}

void LeaseTable::ClearExpiring(LeaseId id, absl::Time now) {
  auto it = leases_.find(id);
  if (it == leases_.end() || !it->second.expiring) return;
  it->second.expiring = false;
  it->second.deadline = now + absl::Milliseconds(it->second.ttl_ms);
  by_deadline_.insert({it->second.deadline, id});
}

}  // namespace ddp::kv
