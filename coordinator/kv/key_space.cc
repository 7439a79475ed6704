#include "coordinator/kv/key_space.h"

#include <utility>

#include "absl/strings/match.h"

namespace ddp::kv {

const KeyValue* KeySpace::Find(const std::string& ns,
                               const std::string& key) const {
  auto ns_it = namespaces_.find(ns);
  if (ns_it == namespaces_.end()) return nullptr;
  auto it = ns_it->second.find(key);
  return it == ns_it->second.end() ? nullptr : &it->second;
}

void KeySpace::Upsert(KeyValue kv) {
  auto& keys = namespaces_[kv.ns];
  auto [it, inserted] = keys.try_emplace(kv.key);
  if (inserted) ++size_;
  it->second = std::move(kv);
}

bool KeySpace::Erase(const std::string& ns, const std::string& key) {
  auto ns_it = namespaces_.find(ns);
  if (ns_it == namespaces_.end()) return false;
  if (ns_it->second.erase(key) == 0) return false;
  --size_;
  if (ns_it->second.empty()) namespaces_.erase(ns_it);
  return true;
}

void KeySpace::Scan(const std::string& ns, absl::string_view prefix,
                    absl::string_view start_after,
                    const std::function<bool(const KeyValue&)>& visit) const {
  auto ns_it = namespaces_.find(ns);
  if (ns_it == namespaces_.end()) return;
  const auto& keys = ns_it->second;
  auto it = keys.lower_bound(std::string(prefix));
  if (!start_after.empty() && start_after >= prefix) {
    it = keys.upper_bound(std::string(start_after));
  }
  for (; it != keys.end(); ++it) {
    if (!absl::StartsWith(it->first, prefix)) break;
    if (!visit(it->second)) break;
  }
}

}  // namespace ddp::kv
