#include "coordinator/storage/sqlite_kv_backend_deferred_keys.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

KeyValue Kv(const std::string& key, Revision revision) {
  return KeyValue{"ns", key, "v" + std::to_string(revision), revision, revision, 1, 0};
}

// One put per key, all at `revision`.
KvWriteBatch Puts(Revision revision, const std::vector<std::string>& keys) {
  KvWriteBatch batch;
  batch.revision = revision;
  for (const std::string& key : keys) {
    batch.upserts.push_back(Kv(key, revision));
    batch.events.push_back(Event{EventType::kPut, Kv(key, revision)});
  }
  return batch;
}

// Commits `batch` writing the slice the rule asks for; returns the slice keys.
std::vector<std::string> Commit(DeferredKeyWrites& deferred, const KvWriteBatch& batch) {
  absl::Span<const DeferredKeyWrites::Change> slice =
      deferred.NextSlice(batch.upserts.size() + batch.deletes.size());
  std::vector<std::string> keys;
  for (const auto& change : slice) keys.push_back(change.first.second);
  deferred.Committed(slice.size(), batch);
  return keys;
}

DeferredKeyWritesOptions SmallOptions() {
  DeferredKeyWritesOptions options;
  options.seal_keys = 4;
  options.seal_revisions = 1000;
  options.min_slice = 1;
  return options;
}

TEST(DeferredKeyWrites, BelowSealSize_NothingWrittenKeysRevisionStays) {
  DeferredKeyWrites deferred(SmallOptions());
  deferred.Reset(0, 0, {});
  EXPECT_TRUE(Commit(deferred, Puts(1, {"a"})).empty());
  EXPECT_TRUE(Commit(deferred, Puts(2, {"b"})).empty());
  EXPECT_EQ(deferred.keys_revision(), 0);
  EXPECT_EQ(deferred.active_size(), 2u);
}

TEST(DeferredKeyWrites, Sealed_WrittenInKeyOrderSlicesThenKeysRevisionAdvances) {
  DeferredKeyWrites deferred(SmallOptions());
  deferred.Reset(0, 0, {});
  Commit(deferred, Puts(1, {"d", "b"}));
  Commit(deferred, Puts(2, {"c", "a"}));  // 4 keys: sealed at revision 2
  EXPECT_EQ(deferred.sealed_left(), 4u);
  // Each commit writes twice its own change count, in key order.
  EXPECT_THAT(Commit(deferred, Puts(3, {"x"})), ::testing::ElementsAre("a", "b"));
  EXPECT_EQ(deferred.keys_revision(), 0);
  EXPECT_THAT(Commit(deferred, Puts(4, {"y"})), ::testing::ElementsAre("c", "d"));
  // Sealed done: kv_keys is complete up to the seal; x and y still wait.
  EXPECT_EQ(deferred.keys_revision(), 2);
  EXPECT_EQ(deferred.active_size(), 2u);
}

TEST(DeferredKeyWrites, RepeatedKey_KeptOnceWithLatestState) {
  DeferredKeyWrites deferred(SmallOptions());
  deferred.Reset(0, 0, {});
  for (Revision r = 1; r <= 3; ++r) Commit(deferred, Puts(r, {"hot"}));
  KvWriteBatch remove;
  remove.revision = 4;
  remove.deletes.push_back({"ns", "gone"});
  Commit(deferred, remove);
  std::vector<DeferredKeyWrites::Change> all = deferred.All();
  ASSERT_EQ(all.size(), 2u);
  for (const auto& [ref, state] : all) {
    if (ref.second == "hot") {
      ASSERT_TRUE(state.has_value());
      EXPECT_EQ(state->mod_revision, 3);
    } else {
      EXPECT_EQ(ref.second, "gone");
      EXPECT_FALSE(state.has_value());
    }
  }
}

TEST(DeferredKeyWrites, NothingDeferred_KeysRevisionFollowsCommits) {
  DeferredKeyWrites deferred(SmallOptions());
  deferred.Reset(5, 5, {});
  KvWriteBatch lease_only;
  lease_only.revision = 6;
  lease_only.lease_grants.push_back({1, 1000});
  Commit(deferred, lease_only);
  EXPECT_EQ(deferred.keys_revision(), 6);  // no key changed
  Commit(deferred, Puts(7, {"a"}));
  EXPECT_EQ(deferred.keys_revision(), 6);  // a is not in kv_keys yet
}

TEST(DeferredKeyWrites, OldChanges_SealedByRevisionLag) {
  DeferredKeyWritesOptions options = SmallOptions();
  options.seal_revisions = 10;
  DeferredKeyWrites deferred(options);
  deferred.Reset(0, 0, {});
  Commit(deferred, Puts(1, {"slow"}));
  KvWriteBatch empty;
  empty.revision = 10;
  Commit(deferred, empty);  // 10 revisions behind: sealed
  EXPECT_EQ(deferred.sealed_left(), 1u);
  empty.revision = 11;
  EXPECT_THAT(Commit(deferred, empty), ::testing::ElementsAre("slow"));
  // Nothing else waits and revision 11 changed no key.
  EXPECT_EQ(deferred.keys_revision(), 11);
}

TEST(DeferredKeyWrites, FailedCommit_NotRecorded_SameSliceNextTime) {
  DeferredKeyWrites deferred(SmallOptions());
  deferred.Reset(0, 0, {});
  Commit(deferred, Puts(1, {"a", "b", "c", "d"}));
  ASSERT_EQ(deferred.sealed_left(), 4u);
  // A commit that fails never calls Committed: the next one retries the slice.
  const KvWriteBatch next = Puts(2, {"e"});
  EXPECT_EQ(deferred.NextSlice(1)[0].first.second, "a");
  EXPECT_THAT(Commit(deferred, next), ::testing::ElementsAre("a", "b"));
}

TEST(DeferredKeyWrites, Reset_ReplayedChangesDeferredAndSealedWhenLarge) {
  DeferredKeyWrites deferred(SmallOptions());
  std::vector<DeferredKeyWrites::Change> replayed;
  for (const char* key : {"k1", "k2", "k3", "k4", "k5"}) {
    replayed.push_back({{"ns", key}, Kv(key, 9)});
  }
  deferred.Reset(3, 9, replayed);
  EXPECT_EQ(deferred.keys_revision(), 3);
  EXPECT_EQ(deferred.sealed_left(), 5u);
  EXPECT_EQ(deferred.All().size(), 5u);
}

TEST(DeferredKeyWrites, BackgroundSort_NoSliceUntilSortedGenerationIsBack) {
  DeferredKeyWritesOptions options = SmallOptions();
  options.background_sort = true;
  DeferredKeyWrites deferred(options);
  deferred.Reset(0, 0, {});
  Commit(deferred, Puts(1, {"d", "c", "b", "a"}));  // sealed, unsorted
  ASSERT_TRUE(deferred.NeedsSort());
  EXPECT_EQ(deferred.sealed_left(), 4u);
  uint64_t ticket = 0;
  DeferredKeyWrites::ChangeMap unsorted = deferred.TakeForSort(&ticket);
  EXPECT_FALSE(deferred.NeedsSort());
  // Commits go on meanwhile, writing nothing and keeping keys_revision.
  EXPECT_TRUE(Commit(deferred, Puts(2, {"e"})).empty());
  EXPECT_EQ(deferred.keys_revision(), 0);
  deferred.PutSorted(ticket, DeferredKeyWrites::Sort(std::move(unsorted)));
  EXPECT_THAT(Commit(deferred, Puts(3, {"f"})), ::testing::ElementsAre("a", "b"));
  EXPECT_THAT(Commit(deferred, Puts(4, {"g"})), ::testing::ElementsAre("c", "d"));
  EXPECT_EQ(deferred.keys_revision(), 1);
}

TEST(DeferredKeyWrites, BackgroundSort_ResetMeanwhile_StaleSortIgnored) {
  DeferredKeyWritesOptions options = SmallOptions();
  options.background_sort = true;
  DeferredKeyWrites deferred(options);
  deferred.Reset(0, 0, {});
  Commit(deferred, Puts(1, {"a", "b", "c", "d"}));
  uint64_t ticket = 0;
  DeferredKeyWrites::ChangeMap unsorted = deferred.TakeForSort(&ticket);
  deferred.Reset(1, 1, {});  // e.g. Load: everything recomputed
  deferred.PutSorted(ticket, DeferredKeyWrites::Sort(std::move(unsorted)));
  EXPECT_EQ(deferred.sealed_left(), 0u);
  EXPECT_TRUE(deferred.All().empty());
}

}  // namespace
}  // namespace ddp::kv
