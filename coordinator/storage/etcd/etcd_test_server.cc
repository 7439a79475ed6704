#include "coordinator/storage/etcd/etcd_test_server.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/storage/etcd/etcd_state_store.h"
#include "gtest/gtest.h"

namespace ddp::storage {
namespace {

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

bool EtcdTestServer::Installed() { return access(kBinary, X_OK) == 0; }

int EtcdTestServer::RunAllTests(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!Installed()) {
    std::printf("SKIPPED: %s is not installed (tools/setup.sh installs etcd-server)\n", kBinary);
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

void EtcdTestServer::Stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

EtcdTestServer::EtcdTestServer() {
  const char* root = getenv("TEST_TMPDIR");
  std::string dir = std::string(root != nullptr ? root : "/tmp") + "/etcdXXXXXX";
  mkdtemp(dir.data());
  client_port_ = FreePort();
  const int peer = FreePort();
  endpoint_ = absl::StrCat("127.0.0.1:", client_port_);
  const std::string client_url = absl::StrCat("http://", endpoint_);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer);
  pid_ = fork();
  if (pid_ == 0) {
    freopen((dir + ".log").c_str(), "w", stderr);
    execl(kBinary, kBinary, "--data-dir", (dir + "/data").c_str(), "--name", "test",
          "--listen-client-urls", client_url.c_str(), "--advertise-client-urls", client_url.c_str(),
          "--listen-peer-urls", peer_url.c_str(), "--initial-advertise-peer-urls", peer_url.c_str(),
          "--initial-cluster", absl::StrCat("test=", peer_url).c_str(), "--max-txn-ops", "100000",
          "--log-level", "warn", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Ready once a store opens.
  for (int i = 0; i < 200; ++i) {
    if (EtcdStateStore::Open(endpoint_, "/probe", absl::Milliseconds(200)).ok()) return;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ADD_FAILURE() << "etcd did not start; see " << dir << ".log";
}

}  // namespace ddp::storage
