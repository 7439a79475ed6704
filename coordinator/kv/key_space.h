#ifndef DDP_COORDINATOR_KV_KEY_SPACE_H_
#define DDP_COORDINATOR_KV_KEY_SPACE_H_

// The live keys of the store, per namespace, in key order (for prefix ranges).
//
// Each namespace keeps its records in a hash map: Find and Upsert are one hash
// lookup (the committer does two per write). A B-tree of the records
// themselves held only three ~160-byte records per 256-byte node, so every
// lookup walked a dozen levels of string compares.
//
// Key order is needed only by Scan (Range, prefix delete), so it is kept
// lazily: a new key goes into an unordered set, and the first Scan of the
// namespace sorts those and merges them into an ordered index of views of the
// keys. A stream of puts that is never scanned never pays for ordering; a
// scan pays once for the keys added since the previous one.
//
// It also knows which records hold a lease (ForEachLeased), so that a store
// that takes over a KeySpace attaches the keys to their leases without
// looking at every key.
//
// A KeySpace is built by the storage backend that loads the store (or kept
// current by a standby that follows the store, coordinator/storage/etcd) and
// moved into the KvStore whole: moving keeps every record where it is.
//
// Thread-safety: not thread-safe for mutations; the KvStore guards it with its
// state mutex, and Find and Scan may run concurrently with each other (Scan
// serializes its index work on an internal mutex). Moving is a mutation.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/kv/kv_types.h"

namespace ddp::kv {

class KeySpace {
 public:
  KeySpace() = default;
  KeySpace(KeySpace&& other) noexcept;
  KeySpace& operator=(KeySpace&& other) noexcept;
  KeySpace(const KeySpace&) = delete;
  KeySpace& operator=(const KeySpace&) = delete;

  // Null when absent. The pointer is valid until the next mutation.
  const KeyValue* Find(const std::string& ns, const std::string& key) const;
  // Inserts or replaces; returns the lease of the value it replaced (0 when
  // the key was new or had none), and sets `*stored` (if given) to the stored
  // record (valid until the next mutation). One lookup.
  LeaseId Upsert(KeyValue kv, const KeyValue** stored = nullptr);
  // True if the key existed; then `*old_lease` (if given) is its lease.
  bool Erase(const std::string& ns, const std::string& key, LeaseId* old_lease = nullptr);

  // Calls `visit` for the keys of `ns` starting with `prefix` and greater than
  // `start_after` (all when empty), in key order, until it returns false.
  void Scan(const std::string& ns, absl::string_view prefix, absl::string_view start_after,
            const std::function<bool(const KeyValue&)>& visit) const;

  // Calls `visit` for every record, in no particular order.
  void ForEach(const std::function<void(const KeyValue&)>& visit) const;
  // Calls `visit` for every record whose lease is not 0, in no particular order.
  void ForEachLeased(const std::function<void(const KeyValue&)>& visit) const;
  // Orders every key added since the last Scan now, so that the next Scans
  // find them in order (a standby keeping a KeySpace for its promotion).
  void IndexAll() const;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The number of keys of namespace `ns`.
  size_t CountIn(const std::string& ns) const {
    auto it = namespaces_.find(ns);
    return it == namespaces_.end() ? 0 : it->second.records.size();
  }
  // Every namespace that holds a key, in name order, with its key count.
  std::vector<std::pair<std::string, size_t>> Namespaces() const;

 private:
  using Index = absl::btree_map<absl::string_view, const KeyValue*>;
  using Unindexed = absl::flat_hash_map<absl::string_view, const KeyValue*>;
  struct Namespace {
    // Nodes never move, so the indexes may point into them.
    absl::node_hash_map<std::string, KeyValue> records;
    // Every key is in exactly one of these two (guarded by index_mu_).
    mutable Index ordered;
    mutable Unindexed unindexed;
  };

  // Moves the namespace's unindexed keys into its ordered index.
  static void IndexLocked(const Namespace& space);

  absl::flat_hash_map<std::string, Namespace> namespaces_;
  // The records (in `namespaces_`' nodes) whose lease is not 0.
  absl::flat_hash_set<const KeyValue*> leased_;
  size_t size_ = 0;
  mutable absl::Mutex index_mu_;
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_KEY_SPACE_H_
