#ifndef DDP_COORDINATOR_KV_KEY_SPACE_H_
#define DDP_COORDINATOR_KV_KEY_SPACE_H_

// The live keys of the store, per namespace, in key order (for prefix ranges).
//
// Thread-safety: not thread-safe; the KvStore guards it with its state mutex.

#include <functional>
#include <string>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "coordinator/kv/kv_types.h"

namespace ddp::kv {

class KeySpace {
 public:
  // Null when absent. The pointer is valid until the next mutation.
  const KeyValue* Find(const std::string& ns, const std::string& key) const;
  void Upsert(KeyValue kv);
  // True if the key existed.
  bool Erase(const std::string& ns, const std::string& key);

  // Calls `visit` for the keys of `ns` starting with `prefix` and greater than
  // `start_after` (all when empty), in key order, until it returns false.
  void Scan(const std::string& ns, absl::string_view prefix,
            absl::string_view start_after,
            const std::function<bool(const KeyValue&)>& visit) const;

  size_t size() const { return size_; }

 private:
  absl::flat_hash_map<std::string, absl::btree_map<std::string, KeyValue>>
      namespaces_;
  size_t size_ = 0;
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_KEY_SPACE_H_
