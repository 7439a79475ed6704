#include "coordinator/kv/key_space.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/match.h"

namespace ddp::kv {

KeySpace::KeySpace(KeySpace&& other) noexcept { *this = std::move(other); }

KeySpace& KeySpace::operator=(KeySpace&& other) noexcept {
  if (this == &other) return *this;
  // The maps' node storage moves with them: records, and the views and
  // pointers to them, stay valid.
  namespaces_ = std::move(other.namespaces_);
  leased_ = std::move(other.leased_);
  size_ = other.size_;
  other.namespaces_.clear();
  other.leased_.clear();
  other.size_ = 0;
  return *this;
}

const KeyValue* KeySpace::Find(const std::string& ns, const std::string& key) const {
  auto ns_it = namespaces_.find(ns);
  if (ns_it == namespaces_.end()) return nullptr;
  auto it = ns_it->second.records.find(key);
  return it == ns_it->second.records.end() ? nullptr : &it->second;
}

LeaseId KeySpace::Upsert(KeyValue kv, const KeyValue** stored) {
  Namespace& space = namespaces_[kv.ns];
  auto [it, inserted] = space.records.try_emplace(kv.key);
  LeaseId old_lease = 0;
  if (inserted) {
    ++size_;
    absl::MutexLock lock(&index_mu_);
    space.unindexed.emplace(absl::string_view(it->first), &it->second);
  } else {
    old_lease = it->second.lease;
  }
  it->second = std::move(kv);
  if (it->second.lease != 0) {
    leased_.insert(&it->second);
  } else if (old_lease != 0) {
    leased_.erase(&it->second);
  }
  if (stored != nullptr) *stored = &it->second;
  return old_lease;
}

bool KeySpace::Erase(const std::string& ns, const std::string& key, LeaseId* old_lease) {
  auto ns_it = namespaces_.find(ns);
  if (ns_it == namespaces_.end()) return false;
  Namespace& space = ns_it->second;
  auto it = space.records.find(key);
  if (it == space.records.end()) return false;
  if (old_lease != nullptr) *old_lease = it->second.lease;
  if (it->second.lease != 0) leased_.erase(&it->second);
  {
    absl::MutexLock lock(&index_mu_);
    const absl::string_view view(it->first);
    if (space.unindexed.erase(view) == 0) space.ordered.erase(view);
  }
  space.records.erase(it);
  --size_;
  if (space.records.empty()) namespaces_.erase(ns_it);
  return true;
}

void KeySpace::IndexLocked(const Namespace& space) {
  if (space.unindexed.empty()) return;
  std::vector<std::pair<absl::string_view, const KeyValue*>> added(space.unindexed.begin(),
                                                                   space.unindexed.end());
  std::sort(added.begin(), added.end());
  // Ascending inserts: each lands next to the previous one's position.
  auto hint = space.ordered.begin();
  for (const auto& entry : added) {
    hint = std::next(space.ordered.insert(hint, entry));
  }
  space.unindexed.clear();
}

void KeySpace::ForEach(const std::function<void(const KeyValue&)>& visit) const {
  for (const auto& [name, space] : namespaces_) {
    for (const auto& [key, record] : space.records) visit(record);
  }
}

void KeySpace::ForEachLeased(const std::function<void(const KeyValue&)>& visit) const {
  for (const KeyValue* record : leased_) visit(*record);
}

void KeySpace::IndexAll() const {
  absl::MutexLock lock(&index_mu_);
  for (const auto& [name, space] : namespaces_) IndexLocked(space);
}

std::vector<std::pair<std::string, size_t>> KeySpace::Namespaces() const {
  std::vector<std::pair<std::string, size_t>> out;
  out.reserve(namespaces_.size());
  for (const auto& [name, space] : namespaces_) out.emplace_back(name, space.records.size());
  std::sort(out.begin(), out.end());
  return out;
}

void KeySpace::Scan(const std::string& ns, absl::string_view prefix, absl::string_view start_after,
                    const std::function<bool(const KeyValue&)>& visit) const {
  auto ns_it = namespaces_.find(ns);
  if (ns_it == namespaces_.end()) return;
  absl::MutexLock lock(&index_mu_);
  IndexLocked(ns_it->second);
  const Index& ordered = ns_it->second.ordered;
  auto it = ordered.lower_bound(prefix);
  if (!start_after.empty() && start_after >= prefix) {
    it = ordered.upper_bound(start_after);
  }
  for (; it != ordered.end(); ++it) {
    if (!absl::StartsWith(it->first, prefix)) break;
    if (!visit(*it->second)) break;
  }
}

}  // namespace ddp::kv
