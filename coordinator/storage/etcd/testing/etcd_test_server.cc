#include "coordinator/storage/etcd/testing/etcd_test_server.h"

#include <stdlib.h>

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddp::storage {

int EtcdTestServer::RunAllTests(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!testing::EtcdInstalled()) {
    std::printf("SKIPPED: %s is not installed (tools/setup.sh installs etcd-server)\n",
                testing::kEtcdBinary);
    return 0;
  }
  const int result = RUN_ALL_TESTS();
  Get().Stop();
  return result;
}

EtcdTestServer& EtcdTestServer::Get() {
  static EtcdTestServer* etcd = new EtcdTestServer();
  return *etcd;
}

std::string EtcdTestServer::NewPrefix() { return absl::StrCat("/test/", next_.fetch_add(1)); }

void EtcdTestServer::Stop() { etcd_.reset(); }

EtcdTestServer::EtcdTestServer() {
  const char* root = getenv("TEST_TMPDIR");
  std::string dir = std::string(root != nullptr ? root : "/tmp") + "/etcdXXXXXX";
  mkdtemp(dir.data());
  absl::StatusOr<std::unique_ptr<testing::EtcdCluster>> etcd =
      testing::EtcdCluster::Start(dir, /*members=*/1);
  if (!etcd.ok()) {
    ADD_FAILURE() << "etcd did not start: " << etcd.status();
    return;
  }
  etcd_ = *std::move(etcd);
  endpoint_ = etcd_->endpoints().front();
  absl::SimpleAtoi(endpoint_.substr(endpoint_.rfind(':') + 1), &client_port_);
}

}  // namespace ddp::storage
