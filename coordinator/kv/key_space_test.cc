#include "coordinator/kv/key_space.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ddp::kv {
namespace {

KeyValue Kv(const std::string& ns, const std::string& key) {
  KeyValue kv;
  kv.ns = ns;
  kv.key = key;
  kv.value = key;
  return kv;
}

std::vector<std::string> ScanKeys(const KeySpace& space, const std::string& prefix,
                                  const std::string& start_after) {
  std::vector<std::string> keys;
  space.Scan("ns", prefix, start_after, [&](const KeyValue& kv) {
    keys.push_back(kv.key);
    return true;
  });
  return keys;
}

TEST(KeySpaceTest, Scan_PrefixAndStartAfter_InKeyOrder) {
  KeySpace space;
  for (const char* key : {"b2", "a", "b1", "b3", "c"}) space.Upsert(Kv("ns", key));
  space.Upsert(Kv("other", "b0"));
  EXPECT_EQ(ScanKeys(space, "b", ""), (std::vector<std::string>{"b1", "b2", "b3"}));
  EXPECT_EQ(ScanKeys(space, "b", "b1"), (std::vector<std::string>{"b2", "b3"}));
  EXPECT_EQ(ScanKeys(space, "", "b3"), (std::vector<std::string>{"c"}));
  EXPECT_EQ(space.size(), 6u);
}

TEST(KeySpaceTest, UpsertErase_CountsAndFinds) {
  KeySpace space;
  space.Upsert(Kv("ns", "a"));
  space.Upsert(Kv("ns", "a"));
  EXPECT_EQ(space.size(), 1u);
  ASSERT_NE(space.Find("ns", "a"), nullptr);
  EXPECT_TRUE(space.Erase("ns", "a"));
  EXPECT_FALSE(space.Erase("ns", "a"));
  EXPECT_EQ(space.Find("ns", "a"), nullptr);
  EXPECT_EQ(space.size(), 0u);
}

TEST(KeySpaceTest, Namespaces_InNameOrderWithCounts_EmptiedOnesGone) {
  KeySpace space;
  EXPECT_TRUE(space.Namespaces().empty());
  space.Upsert(Kv("job-b", "x"));
  space.Upsert(Kv("job-a", "x"));
  space.Upsert(Kv("job-a", "y"));
  space.Upsert(Kv("gone", "z"));
  space.Erase("gone", "z");
  using Counts = std::vector<std::pair<std::string, size_t>>;
  EXPECT_EQ(space.Namespaces(), (Counts{{"job-a", 2}, {"job-b", 1}}));
}

TEST(KeySpaceTest, UpsertErase_ReportsReplacedLeaseAndKeepsOrderIndex) {
  KeySpace space;
  KeyValue leased = Kv("ns", "k");
  leased.lease = 7;
  EXPECT_EQ(space.Upsert(leased), 0);  // new key
  const KeyValue* stored = nullptr;
  KeyValue plain = Kv("ns", "k");
  plain.value = "v2";
  EXPECT_EQ(space.Upsert(plain, &stored), 7);
  ASSERT_NE(stored, nullptr);
  EXPECT_EQ(stored->value, "v2");
  // Many keys: the ordered index still matches the records after erasures.
  for (int i = 0; i < 1000; ++i) space.Upsert(Kv("ns", "x" + std::to_string(i)));
  for (int i = 0; i < 1000; i += 2) {
    LeaseId lease = -1;
    EXPECT_TRUE(space.Erase("ns", "x" + std::to_string(i), &lease));
    EXPECT_EQ(lease, 0);
  }
  std::vector<std::string> keys = ScanKeys(space, "x99", "");
  EXPECT_EQ(keys, (std::vector<std::string>{"x99", "x991", "x993", "x995", "x997", "x999"}));
  EXPECT_EQ(space.size(), 501u);
}

TEST(KeySpaceTest, Scan_KeysAddedAndErasedBetweenScans_OrderStaysExact) {
  KeySpace space;
  for (const char* key : {"m", "c", "x"}) space.Upsert(Kv("ns", key));
  EXPECT_EQ(ScanKeys(space, "", ""), (std::vector<std::string>{"c", "m", "x"}));
  // Indexed keys erased, new keys added (some before, some after the old).
  EXPECT_TRUE(space.Erase("ns", "m"));
  for (const char* key : {"a", "n", "z", "d"}) space.Upsert(Kv("ns", key));
  EXPECT_TRUE(space.Erase("ns", "z"));  // erased before any scan saw it
  EXPECT_EQ(ScanKeys(space, "", ""), (std::vector<std::string>{"a", "c", "d", "n", "x"}));
  EXPECT_EQ(ScanKeys(space, "", "c"), (std::vector<std::string>{"d", "n", "x"}));
}

std::vector<std::string> LeasedKeys(const KeySpace& space) {
  std::vector<std::string> keys;
  space.ForEachLeased(
      [&](const KeyValue& kv) { keys.push_back(kv.key + "@" + std::to_string(kv.lease)); });
  std::sort(keys.begin(), keys.end());
  return keys;
}

TEST(KeySpaceTest, ForEachLeased_FollowsLeasesGivenReplacedAndErased) {
  KeySpace space;
  KeyValue a = Kv("ns", "a");
  a.lease = 1;
  KeyValue b = Kv("ns", "b");
  b.lease = 2;
  space.Upsert(a);
  space.Upsert(b);
  space.Upsert(Kv("ns", "plain"));
  EXPECT_EQ(LeasedKeys(space), (std::vector<std::string>{"a@1", "b@2"}));
  space.Upsert(Kv("ns", "a"));  // the lease taken off
  b.lease = 3;
  space.Upsert(b);  // another lease
  EXPECT_EQ(LeasedKeys(space), (std::vector<std::string>{"b@3"}));
  EXPECT_TRUE(space.Erase("ns", "b"));
  EXPECT_EQ(LeasedKeys(space), (std::vector<std::string>{}));
}

TEST(KeySpaceTest, Move_KeepsRecordsOrderAndLeases) {
  KeySpace space;
  for (const char* key : {"m", "c", "x"}) space.Upsert(Kv("ns", key));
  EXPECT_EQ(ScanKeys(space, "", ""), (std::vector<std::string>{"c", "m", "x"}));  // indexed
  KeyValue leased = Kv("ns", "b");
  leased.lease = 9;
  space.Upsert(leased);  // not indexed yet
  space.IndexAll();
  KeySpace moved(std::move(space));
  EXPECT_TRUE(space.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(moved.size(), 4u);
  EXPECT_EQ(ScanKeys(moved, "", ""), (std::vector<std::string>{"b", "c", "m", "x"}));
  EXPECT_EQ(LeasedKeys(moved), (std::vector<std::string>{"b@9"}));
  KeySpace assigned;
  assigned.Upsert(Kv("ns", "gone"));
  assigned = std::move(moved);
  EXPECT_EQ(assigned.Find("ns", "gone"), nullptr);
  ASSERT_NE(assigned.Find("ns", "m"), nullptr);
  EXPECT_TRUE(assigned.Erase("ns", "m"));
  EXPECT_EQ(ScanKeys(assigned, "", ""), (std::vector<std::string>{"b", "c", "x"}));
  size_t visited = 0;
  assigned.ForEach([&](const KeyValue&) { ++visited; });
  EXPECT_EQ(visited, 3u);
}

TEST(KeySpaceTest, Scan_ConcurrentScans_SameResult) {
  KeySpace space;
  for (int i = 0; i < 2000; ++i) space.Upsert(Kv("ns", "k" + std::to_string(i)));
  std::vector<std::vector<std::string>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { results[t] = ScanKeys(space, "k1", ""); });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(results[0].size(), 1111u);  // k1, k10-k19, k100-k199, k1000-k1999
  for (int t = 1; t < 4; ++t) EXPECT_EQ(results[t], results[0]);
}

}  // namespace
}  // namespace ddp::kv
