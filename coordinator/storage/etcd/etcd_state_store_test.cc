// EtcdStateStore against a real etcd 3.4 (Debian's etcd-server, started by
// this test on loopback ports with its own data dir): both conformance suites
// (KvBackend and JobStateStore), and the guard against a second writer.
// Without /usr/bin/etcd the test says so and does nothing (tools/setup.sh
// installs it).

#include "coordinator/storage/etcd/etcd_state_store.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/storage/etcd/etcd_channel.h"
#include "coordinator/storage/job_state_store_conformance.h"
#include "coordinator/storage/kv_backend_conformance.h"
#include "etcd/rpc.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"

namespace ddp::storage {
namespace {

constexpr char kEtcd[] = "/usr/bin/etcd";

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

// One etcd for the whole test binary; every store gets a prefix of its own.
class Etcd {
 public:
  static Etcd& Get() {
    static Etcd* etcd = new Etcd();
    return *etcd;
  }
  const std::string& endpoint() const { return endpoint_; }
  std::string NewPrefix() { return absl::StrCat("/test/", next_.fetch_add(1)); }
  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  Etcd() {
    const char* root = getenv("TEST_TMPDIR");
    std::string dir = std::string(root != nullptr ? root : "/tmp") + "/etcdXXXXXX";
    mkdtemp(dir.data());
    const int client = FreePort(), peer = FreePort();
    endpoint_ = absl::StrCat("127.0.0.1:", client);
    const std::string client_url = absl::StrCat("http://", endpoint_);
    const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer);
    pid_ = fork();
    if (pid_ == 0) {
      freopen((dir + ".log").c_str(), "w", stderr);
      execl(kEtcd, kEtcd, "--data-dir", (dir + "/data").c_str(), "--name", "test",
            "--listen-client-urls", client_url.c_str(), "--advertise-client-urls",
            client_url.c_str(), "--listen-peer-urls", peer_url.c_str(),
            "--initial-advertise-peer-urls", peer_url.c_str(), "--initial-cluster",
            absl::StrCat("test=", peer_url).c_str(), "--max-txn-ops", "100000", "--log-level",
            "warn", static_cast<char*>(nullptr));
      _exit(127);
    }
    // Ready once a store opens.
    for (int i = 0; i < 200; ++i) {
      if (EtcdStateStore::Open(endpoint_, "/probe", absl::Milliseconds(200)).ok()) return;
      absl::SleepFor(absl::Milliseconds(50));
    }
    ADD_FAILURE() << "etcd did not start; see " << dir << ".log";
  }

  std::string endpoint_;
  pid_t pid_ = -1;
  std::atomic<int> next_{0};
};

template <typename Interface>
class EtcdFactory {
 public:
  absl::StatusOr<std::unique_ptr<Interface>> Open() {
    absl::StatusOr<std::unique_ptr<EtcdStateStore>> store =
        EtcdStateStore::Open(Etcd::Get().endpoint(), prefix_);
    if (!store.ok()) return store.status();
    return std::unique_ptr<Interface>(std::move(store).value());
  }
  absl::StatusOr<std::unique_ptr<Interface>> Reopen(std::unique_ptr<Interface> store) {
    store.reset();
    return Open();
  }

 private:
  const std::string prefix_ = Etcd::Get().NewPrefix();
};

TEST(EtcdStateStoreTest, SecondWriterOnThePrefix_TheFirstCannotCommit) {
  const std::string prefix = Etcd::Get().NewPrefix();
  auto first = EtcdStateStore::Open(Etcd::Get().endpoint(), prefix);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(
      (*first)
          ->Apply(rendezvous::conformance::CreateJob(rendezvous::conformance::FullRecord("a")))
          .ok());
  auto second = EtcdStateStore::Open(Etcd::Get().endpoint(), prefix);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(
      (*second)
          ->Apply(rendezvous::conformance::CreateJob(rendezvous::conformance::FullRecord("b")))
          .ok());
  absl::Status stale =
      (*first)->Apply(rendezvous::conformance::CreateJob(rendezvous::conformance::FullRecord("c")));
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition) << stale;
  auto reader = EtcdStateStore::Open(Etcd::Get().endpoint(), prefix);
  ASSERT_TRUE(reader.ok());
  absl::StatusOr<std::vector<rendezvous::JobSnapshot>> jobs = (*reader)->LoadAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), 2u) << "the stale writer's job must not be there";
}

// The leader's fence: once its election key is gone (deleted, or created
// again by another leader), its transactions are refused and it is told to
// stop; nothing of them is written.
TEST(EtcdStateStoreTest, Fenced_ElectionKeyReplaced_CommitRefusedAndFatal) {
  const std::string prefix = Etcd::Get().NewPrefix();
  auto kv = etcdserverpb::KV::NewStub(OpenEtcdChannel({Etcd::Get().endpoint()}));
  auto put_leader_key = [&]() -> int64_t {
    etcdserverpb::PutRequest put;
    put.set_key(prefix + "/leader");
    put.set_value("me");
    etcdserverpb::PutResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(kv->Put(&context, put, &response).ok());
    return response.header().revision();
  };
  EtcdStateStoreOptions options;
  options.fence = EtcdFence{prefix + "/leader", put_leader_key()};
  int fatal_calls = 0;
  options.on_fatal = [&](const absl::Status&) { ++fatal_calls; };
  auto store = EtcdStateStore::Open(OpenEtcdChannel({Etcd::Get().endpoint()}), prefix, options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(
      (*store)
          ->Apply(rendezvous::conformance::CreateJob(rendezvous::conformance::FullRecord("a")))
          .ok());
  {
    etcdserverpb::DeleteRangeRequest del;
    del.set_key(prefix + "/leader");
    etcdserverpb::DeleteRangeResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(kv->DeleteRange(&context, del, &response).ok());
  }
  put_leader_key();  // another leader's key: a newer create revision
  absl::Status deposed =
      (*store)->Apply(rendezvous::conformance::CreateJob(rendezvous::conformance::FullRecord("b")));
  EXPECT_EQ(deposed.code(), absl::StatusCode::kFailedPrecondition) << deposed;
  EXPECT_NE(deposed.message().find("no longer leads"), absl::string_view::npos) << deposed;
  EXPECT_EQ(fatal_calls, 1);
  auto reader = EtcdStateStore::Open(Etcd::Get().endpoint(), prefix);
  ASSERT_TRUE(reader.ok());
  absl::StatusOr<std::vector<rendezvous::JobSnapshot>> jobs = (*reader)->LoadAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), 1u) << "the deposed leader's job must not be there";
}

}  // namespace
}  // namespace ddp::storage

namespace ddp::kv {
namespace {
using EtcdKvFactory = storage::EtcdFactory<KvBackend>;
INSTANTIATE_TYPED_TEST_SUITE_P(Etcd, KvBackendConformanceTest, EtcdKvFactory);
}  // namespace
}  // namespace ddp::kv

namespace ddp::rendezvous {
namespace {
using EtcdJobFactory = storage::EtcdFactory<JobStateStore>;
INSTANTIATE_TYPED_TEST_SUITE_P(Etcd, JobStateStoreConformanceTest, EtcdJobFactory);
}  // namespace
}  // namespace ddp::rendezvous

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (access(ddp::storage::kEtcd, X_OK) != 0) {
    std::printf("SKIPPED: %s is not installed (tools/setup.sh installs etcd-server)\n",
                ddp::storage::kEtcd);
    return 0;
  }
  const int result = RUN_ALL_TESTS();
  ddp::storage::Etcd::Get().Stop();
  return result;
}
