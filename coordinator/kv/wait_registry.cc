#include "coordinator/kv/wait_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/kv/kv_validation.h"

namespace ddp::kv {

absl::Status WaitRegistry::Add(const std::string& ns, std::vector<std::string> missing_keys,
                               absl::Time deadline, absl::Duration timeout, Callback done,
                               size_t max_pending) {
  if (waiters_.size() >= max_pending) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many pending wait calls (limit ", max_pending, "); retry later"));
  }
  const uint64_t id = next_id_++;
  Waiter& waiter = waiters_[id];
  waiter.ns = ns;
  waiter.total_keys = missing_keys.size();
  waiter.deadline = deadline;
  waiter.timeout = timeout;
  waiter.done = std::move(done);
  for (std::string& key : missing_keys) {
    if (waiter.missing.insert(key).second) by_key_[KeyRef(ns, std::move(key))].push_back(id);
  }
  by_deadline_.insert({deadline, id});
  return absl::OkStatus();
}

WaitRegistry::Callback WaitRegistry::RemoveWaiter(uint64_t id) {
  auto it = waiters_.find(id);
  Waiter& waiter = it->second;
  for (const std::string& key : waiter.missing) {
    auto key_it = by_key_.find(KeyRef(waiter.ns, key));
    if (key_it == by_key_.end()) continue;
    auto& ids = key_it->second;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
    if (ids.empty()) by_key_.erase(key_it);
  }
  by_deadline_.erase({waiter.deadline, id});
  Callback done = std::move(waiter.done);
  waiters_.erase(it);
  return done;
}

void WaitRegistry::OnKeyPut(const std::string& ns, const std::string& key, Finished* finished) {
  auto key_it = by_key_.find(KeyRef(ns, key));
  if (key_it == by_key_.end()) return;
  std::vector<uint64_t> ids = std::move(key_it->second);
  by_key_.erase(key_it);
  for (uint64_t id : ids) {
    auto it = waiters_.find(id);
    if (it == waiters_.end()) continue;
    it->second.missing.erase(key);
    if (it->second.missing.empty()) finished->emplace_back(RemoveWaiter(id), absl::OkStatus());
  }
}

void WaitRegistry::Expire(absl::Time now, Finished* finished) {
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
    const uint64_t id = by_deadline_.begin()->second;
    const Waiter& waiter = waiters_.at(id);
    const std::string example = *waiter.missing.begin();
    absl::Status status = absl::DeadlineExceededError(absl::StrCat(
        "wait timed out after ", absl::FormatDuration(waiter.timeout), ": ", waiter.missing.size(),
        " of ", waiter.total_keys, " keys still missing in namespace '", waiter.ns, "', e.g. '",
        AbbreviateForMessage(example),
        "'; check that every participant set its key, or raise timeout_ms"));
    finished->emplace_back(RemoveWaiter(id), std::move(status));
  }
}

void WaitRegistry::CancelAll(const absl::Status& status, Finished* finished) {
  while (!waiters_.empty()) {
    finished->emplace_back(RemoveWaiter(waiters_.begin()->first), status);
  }
}

}  // namespace ddp::kv
