#include "coordinator/storage/etcd/etcd_store_spec.h"

#include "gtest/gtest.h"

namespace ddp::storage {
namespace {

TEST(EtcdStoreSpecTest, HostsAndPrefix) {
  absl::StatusOr<EtcdStoreSpec> spec =
      ParseEtcdStoreSpec("etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/prod/ddp/");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->endpoints.size(), 3u);
  EXPECT_EQ(spec->prefix, "/prod/ddp");
  EXPECT_EQ(EtcdTarget(spec->endpoints), "ipv4:10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379");
  spec = ParseEtcdStoreSpec("etcd://etcd-a:2379");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->prefix, "/ddp");
  EXPECT_EQ(EtcdTarget(spec->endpoints), "etcd-a:2379");
  EXPECT_EQ(EtcdTarget({"etcd-a:2379", "etcd-b:2379"}), "etcd-a:2379");
}

TEST(EtcdStoreSpecTest, BadValues_NameThePart) {
  for (const char* bad : {"sqlite:///x", "etcd://", "etcd://host", "etcd://host:0",
                          "etcd://host:70000", "etcd://a:1,,b:2", "etcd://a:1//"}) {
    absl::StatusOr<EtcdStoreSpec> spec = ParseEtcdStoreSpec(bad);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(spec.status().message().find("etcd://HOST:PORT"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace ddp::storage
