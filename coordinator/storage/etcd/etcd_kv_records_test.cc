#include "coordinator/storage/etcd/etcd_kv_records.h"

#include <string>
#include <vector>

#include "ddp/state/v1/records.pb.h"
#include "gtest/gtest.h"

namespace ddp::storage {
namespace {

constexpr char kPrefix[] = "/ddp/";

std::string KeyRecord(const std::string& ns, const std::string& key, const std::string& value,
                      kv::LeaseId lease = 0) {
  kv::KeyValue kv{ns, key, value, 1, 2, 1, lease};
  return ToKeyValueRecord(kv).SerializeAsString();
}

std::string LeaseRecord(kv::LeaseId id, int64_t ttl_ms) {
  state::v1::LeaseRecord lease;
  lease.set_id(id);
  lease.set_ttl_ms(ttl_ms);
  return lease.SerializeAsString();
}

std::vector<std::string> Keys(const kv::KeySpace& keys, const std::string& ns) {
  std::vector<std::string> out;
  keys.Scan(ns, "", "", [&](const kv::KeyValue& kv) {
    out.push_back(kv.key + "=" + kv.value);
    return true;
  });
  return out;
}

TEST(EtcdKvKeyNameTest, AnyBytes_RoundTrip) {
  const std::string ns("job\0/a", 6), key("\xff/k\n", 4);
  const std::string name = EtcdKvKeyName(kPrefix, ns, key);
  EXPECT_EQ(name.rfind("/ddp/k/", 0), 0u);
  auto parsed = ParseEtcdKvKeyName(kPrefix, name);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->first, ns);
  EXPECT_EQ(parsed->second, key);
  EXPECT_FALSE(ParseEtcdKvKeyName(kPrefix, "/ddp/k/6a6f62").has_value());  // no key part
  EXPECT_FALSE(ParseEtcdKvKeyName(kPrefix, "/ddp/k/zz/00").has_value());   // not hex
  EXPECT_FALSE(ParseEtcdKvKeyName(kPrefix, "/other/k/00/00").has_value());
  EXPECT_EQ(EtcdLeaseKeyName(kPrefix, 0x1f), "/ddp/l/000000000000001f");
}

TEST(EtcdKvViewTest, PutsAndDeletes_KeysAndLeasesAsEtcdHoldsThem) {
  EtcdKvView view(kPrefix);
  EXPECT_TRUE(view.Takes(EtcdKvKeyName(kPrefix, "a", "x")));
  EXPECT_TRUE(view.Takes(EtcdLeaseKeyName(kPrefix, 7)));
  EXPECT_FALSE(view.Takes("/ddp/j/6a"));
  EXPECT_FALSE(view.Takes("/ddp/m/meta"));

  view.Put(EtcdKvKeyName(kPrefix, "a", "x"), KeyRecord("a", "x", "1"));
  view.Put(EtcdKvKeyName(kPrefix, "a", "w"), KeyRecord("a", "w", "2", 7));
  view.Put(EtcdLeaseKeyName(kPrefix, 7), LeaseRecord(7, 5000));
  view.Put(EtcdLeaseKeyName(kPrefix, 8), LeaseRecord(8, 1000));
  view.Settle();
  view.Put(EtcdKvKeyName(kPrefix, "a", "x"), KeyRecord("a", "x", "3"));  // overwritten
  view.Put(EtcdKvKeyName(kPrefix, "a", "a"), KeyRecord("a", "a", "4"));
  view.Delete(EtcdKvKeyName(kPrefix, "a", "w"));
  view.Delete(EtcdLeaseKeyName(kPrefix, 8));
  view.Settle();
  EXPECT_TRUE(view.damage().ok()) << view.damage();
  EXPECT_EQ(Keys(view.keys(), "a"), (std::vector<std::string>{"a=4", "x=3"}));
  ASSERT_EQ(view.leases().size(), 1u);
  EXPECT_EQ(view.leases().begin()->second.ttl_ms, 5000);
  int leased = 0;
  view.keys().ForEachLeased([&](const kv::KeyValue&) { ++leased; });
  EXPECT_EQ(leased, 0);  // the leased key was deleted
}

TEST(EtcdKvViewTest, RecordThatDoesNotDecode_DataLossNamingTheKey) {
  EtcdKvView view(kPrefix);
  view.Put(EtcdKvKeyName(kPrefix, "a", "x"), "\xff\xff\xff");
  view.Put(EtcdKvKeyName(kPrefix, "a", "y"), KeyRecord("a", "y", "ok"));
  EXPECT_EQ(view.damage().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(view.damage().message().find("/ddp/k/61/78"), std::string::npos) << view.damage();
  EtcdKvView names(kPrefix);
  names.Delete("/ddp/l/not-hex");
  EXPECT_EQ(names.damage().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ddp::storage
