#ifndef DDP_COORDINATOR_STORAGE_SQLITE_KV_BACKEND_DEFERRED_KEYS_H_
#define DDP_COORDINATOR_STORAGE_SQLITE_KV_BACKEND_DEFERRED_KEYS_H_

// The key changes that SqliteKvBackend has made durable in kv_events but not
// yet written to kv_keys, and the rule that says which ones the next commit
// writes.
//
// Why: writing each put's row into kv_keys (clustered by (ns, key)) inside its
// own commit dirtied one B-tree page per put for unrelated keys (256 clients =
// 256 pages of 4 KiB per group commit): most of the committer's time went to
// WAL frames. kv_events is append-only, so it costs a few pages per commit;
// kv_keys can follow later, in key order, where neighbouring keys share pages
// and a key changed many times is written once.
//
// Two generations:
//   active  the changes of recent commits (latest state per key; nullopt =
//           deleted), merged as commits succeed;
//   sealed  a former active generation, sorted by key, written to kv_keys a
//           slice per commit (inside that commit's transaction).
// Active is sealed when sealed is empty and active holds seal_keys keys, or
// keys_revision is seal_revisions behind (which bounds the replay on reopen).
// Sorting 8,192 keys takes several milliseconds, so with background_sort the
// sealed generation is sorted by another thread (TakeForSort / Sort /
// PutSorted, outside the writer mutex) while commits go on; until it is back,
// commits write no slice. A slice is twice the committing
// batch's own change count (at least min_slice), so sealed is done before the
// next active generation is full.
//
// keys_revision: kv_keys holds every key's state as of this revision or newer.
// The backend keeps every event after it (a reopened store replays them over
// kv_keys), and records it in kv_meta in the same transaction as the writes
// that advance it.
//
// Thread-safety: not thread-safe; SqliteKvBackend guards it with its writer
// mutex.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "coordinator/kv/kv_backend.h"

namespace ddp::kv {

struct DeferredKeyWritesOptions {
  size_t seal_keys = 8192;
  int64_t seal_revisions = 50'000;
  size_t min_slice = 256;
  // Sealing leaves the sort to the caller's other thread (see above).
  bool background_sort = false;
};

class DeferredKeyWrites {
 public:
  using KeyRef = std::pair<std::string, std::string>;  // (ns, key)
  // A key's state to write: a row, or nullopt to delete the row.
  using Change = std::pair<KeyRef, std::optional<KeyValue>>;

  explicit DeferredKeyWrites(DeferredKeyWritesOptions options);

  // Starts over: kv_keys is complete up to `keys_revision`, the last commit is
  // `revision`, and `changes` (latest state per key) happened in between.
  void Reset(Revision keys_revision, Revision revision, std::vector<Change> changes);

  // The sealed changes the commit of a batch with `batch_changes` key changes
  // (upserts + deletes) writes to kv_keys.
  absl::Span<const Change> NextSlice(size_t batch_changes) const;

  // keys_revision once a commit of `batch` that wrote NextSlice (of
  // `slice_size` changes) succeeds.
  Revision KeysRevisionAfter(size_t slice_size, const KvWriteBatch& batch) const;

  // Records that the commit of `batch`, which wrote the next `slice_size`
  // sealed changes, succeeded; may seal the active generation.
  void Committed(size_t slice_size, const KvWriteBatch& batch);

  // Every change not in kv_keys yet, sealed first then active (a later
  // change of a key comes after an earlier one), for a final write; the caller
  // then calls Reset. Not while a generation is out for sorting.
  std::vector<Change> All() const;

  using ChangeMap = absl::flat_hash_map<KeyRef, std::optional<KeyValue>>;
  // With background_sort: true when a sealed generation waits to be sorted.
  bool NeedsSort() const { return !to_sort_.empty() && !sort_taken_; }
  // Hands the generation to sort to the caller; `*ticket` goes to PutSorted.
  ChangeMap TakeForSort(uint64_t* ticket);
  // Sorts a generation by key (no state: call it without any lock).
  static std::vector<Change> Sort(ChangeMap changes);
  // Installs the sorted generation (ignored if Reset ran since TakeForSort).
  void PutSorted(uint64_t ticket, std::vector<Change> sorted);

  Revision keys_revision() const { return keys_revision_; }
  Revision revision() const { return revision_; }
  size_t active_size() const { return active_.size(); }
  // Sealed changes not yet written (being sorted included).
  size_t sealed_left() const { return sealed_.size() - sealed_next_ + to_sort_size_; }

 private:
  void MaybeSeal();
  // A sealed generation exists (sorted or not) that is not fully written.
  bool SealedPending() const { return !sealed_.empty() || to_sort_size_ > 0; }

  const DeferredKeyWritesOptions options_;
  Revision keys_revision_ = 0;
  Revision revision_ = 0;  // of the last commit
  ChangeMap active_;
  // Sealed, waiting to be (or being) sorted by another thread.
  ChangeMap to_sort_;
  size_t to_sort_size_ = 0;
  bool sort_taken_ = false;
  uint64_t reset_count_ = 0;      // tickets of TakeForSort
  std::vector<Change> sealed_;    // sorted by key
  size_t sealed_next_ = 0;        // sealed_[0, sealed_next_) are written
  Revision sealed_revision_ = 0;  // sealed_ holds the changes up to here
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_STORAGE_SQLITE_KV_BACKEND_DEFERRED_KEYS_H_
