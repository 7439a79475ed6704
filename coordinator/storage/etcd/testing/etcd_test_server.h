#ifndef DDP_COORDINATOR_STORAGE_ETCD_TESTING_ETCD_TEST_SERVER_H_
#define DDP_COORDINATOR_STORAGE_ETCD_TESTING_ETCD_TEST_SERVER_H_

// One etcd 3.4 (Debian's etcd-server) for a whole test binary: a one-member
// testing::EtcdCluster (tests/ha/ha_cluster.h: loopback ports, --max-txn-ops
// 100000 as the coordinators need) with its data dir under $TEST_TMPDIR,
// started on first use. Every user takes a prefix of its own. A test's main
// is RunAllTests, which says SKIPPED and runs nothing without etcd
// (tools/setup.sh installs it).
//
// Thread-safety: Get and NewPrefix from any thread; Stop once, at the end.

#include <atomic>
#include <memory>
#include <string>

#include "tests/ha/ha_cluster.h"

namespace ddp::storage {

class EtcdTestServer {
 public:
  // A test binary's main: every test on one etcd, which is stopped after
  // them; without etcd, SKIPPED and 0.
  static int RunAllTests(int argc, char** argv);
  // Starts it on first use; a failure to start is a test failure.
  static EtcdTestServer& Get();

  // "127.0.0.1:PORT", its client port.
  const std::string& endpoint() const { return endpoint_; }
  int client_port() const { return client_port_; }
  // "/test/N": a prefix no other user of this server has.
  std::string NewPrefix();
  // kill -9, and waits for it.
  void Stop();

 private:
  EtcdTestServer();

  std::unique_ptr<testing::EtcdCluster> etcd_;
  std::string endpoint_;
  int client_port_ = 0;
  std::atomic<int> next_{0};
};

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_ETCD_TESTING_ETCD_TEST_SERVER_H_
