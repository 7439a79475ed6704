#include "coordinator/kv/key_space.h"

#include <string>
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

std::vector<std::string> ScanKeys(const KeySpace& space,
                                  const std::string& prefix,
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
  for (const char* key : {"b2", "a", "b1", "b3", "c"})
    space.Upsert(Kv("ns", key));
  space.Upsert(Kv("other", "b0"));
  EXPECT_EQ(ScanKeys(space, "b", ""),
            (std::vector<std::string>{"b1", "b2", "b3"}));
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

}  // namespace
}  // namespace ddp::kv
