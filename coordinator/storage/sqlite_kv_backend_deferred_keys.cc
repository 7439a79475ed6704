#include "coordinator/storage/sqlite_kv_backend_deferred_keys.h"

#include <algorithm>

namespace ddp::kv {

DeferredKeyWrites::DeferredKeyWrites(DeferredKeyWritesOptions options) : options_(options) {}

void DeferredKeyWrites::Reset(Revision keys_revision, Revision revision,
                              std::vector<Change> changes) {
  keys_revision_ = keys_revision;
  revision_ = revision;
  sealed_.clear();
  sealed_next_ = 0;
  to_sort_.clear();
  to_sort_size_ = 0;
  sort_taken_ = false;
  ++reset_count_;  // a sort under way belongs to the old state
  active_.clear();
  for (Change& change : changes) {
    active_[std::move(change.first)] = std::move(change.second);
  }
  MaybeSeal();
}

absl::Span<const DeferredKeyWrites::Change> DeferredKeyWrites::NextSlice(
    size_t batch_changes) const {
  const size_t want = std::max(options_.min_slice, 2 * batch_changes);
  const size_t n = std::min(sealed_.size() - sealed_next_, want);
  return absl::MakeConstSpan(sealed_.data() + sealed_next_, n);
}

Revision DeferredKeyWrites::KeysRevisionAfter(size_t slice_size, const KvWriteBatch& batch) const {
  const bool sealed_done = to_sort_size_ == 0 && sealed_next_ + slice_size >= sealed_.size();
  if (!sealed_done) return keys_revision_;
  if (active_.empty()) {
    // Nothing deferred before this batch: kv_keys is complete up to the
    // previous commit, or up to this one if it changes no key.
    const bool changes_keys = !batch.upserts.empty() || !batch.deletes.empty();
    return changes_keys ? revision_ : batch.revision;
  }
  // Active still waits; the sealed generation (if there was one) is done.
  return SealedPending() ? sealed_revision_ : keys_revision_;
}

void DeferredKeyWrites::Committed(size_t slice_size, const KvWriteBatch& batch) {
  const Revision next_keys_revision = KeysRevisionAfter(slice_size, batch);
  sealed_next_ += slice_size;
  if (sealed_next_ >= sealed_.size()) {
    sealed_.clear();
    sealed_next_ = 0;
  }
  keys_revision_ = next_keys_revision;
  revision_ = batch.revision;
  for (const KeyValue& kv : batch.upserts) active_[KeyRef(kv.ns, kv.key)] = kv;
  for (const auto& ref : batch.deletes) active_[ref] = std::nullopt;
  MaybeSeal();
}

void DeferredKeyWrites::MaybeSeal() {
  if (SealedPending() || active_.empty()) return;
  if (active_.size() < options_.seal_keys && revision_ - keys_revision_ < options_.seal_revisions) {
    return;
  }
  sealed_revision_ = revision_;
  if (options_.background_sort) {
    to_sort_size_ = active_.size();
    to_sort_ = std::move(active_);
  } else {
    sealed_ = Sort(std::move(active_));
  }
  active_ = ChangeMap();
  active_.reserve(options_.seal_keys);  // no regrowth steps on the way up
}

DeferredKeyWrites::ChangeMap DeferredKeyWrites::TakeForSort(uint64_t* ticket) {
  *ticket = reset_count_;
  sort_taken_ = true;
  ChangeMap taken = std::move(to_sort_);
  to_sort_ = ChangeMap();
  return taken;
}

std::vector<DeferredKeyWrites::Change> DeferredKeyWrites::Sort(ChangeMap changes) {
  std::vector<Change> sorted;
  sorted.reserve(changes.size());
  for (auto& [ref, state] : changes) sorted.emplace_back(ref, std::move(state));
  std::sort(sorted.begin(), sorted.end(),
            [](const Change& a, const Change& b) { return a.first < b.first; });
  return sorted;
}

void DeferredKeyWrites::PutSorted(uint64_t ticket, std::vector<Change> sorted) {
  if (ticket != reset_count_ || !sort_taken_) return;
  sort_taken_ = false;
  to_sort_size_ = 0;
  sealed_ = std::move(sorted);
  sealed_next_ = 0;
}

std::vector<DeferredKeyWrites::Change> DeferredKeyWrites::All() const {
  std::vector<Change> all(sealed_.begin() + sealed_next_, sealed_.end());
  for (const auto& [ref, state] : to_sort_) all.emplace_back(ref, state);
  for (const auto& [ref, state] : active_) all.emplace_back(ref, state);
  return all;
}

}  // namespace ddp::kv
