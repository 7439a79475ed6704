// EtcdPrefixMirror against a real etcd 3.4 (EtcdTestServer): a snapshot of
// keys already there (several pages, one revision), then puts, deletes and
// transactions followed; what it hands over equals what etcd holds; a watch
// broken while etcd compacted its history ends in a fresh snapshot. Without
// /usr/bin/etcd the test says so and does nothing.

#include "coordinator/storage/etcd/etcd_prefix_mirror.h"

#include <stdlib.h>

#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "coordinator/storage/etcd/etcd_channel.h"
#include "coordinator/storage/etcd/testing/etcd_test_server.h"
#include "etcd/rpc.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/e2e/tcp_proxy.h"

namespace ddp::storage {
namespace {

constexpr absl::Duration kCatchUp = absl::Seconds(10);

// Raw etcd calls on one prefix; each returns the revision it wrote at.
class EtcdWriter {
 public:
  EtcdWriter()
      : kv_(etcdserverpb::KV::NewStub(OpenEtcdChannel({EtcdTestServer::Get().endpoint()}))) {}

  int64_t Put(const std::string& key, const std::string& value) {
    etcdserverpb::TxnRequest txn;
    AddPut(txn, key, value);
    return Commit(txn);
  }
  int64_t Delete(const std::string& key, const std::string& range_end = "") {
    etcdserverpb::TxnRequest txn;
    AddDelete(txn, key, range_end);
    return Commit(txn);
  }
  static void AddPut(etcdserverpb::TxnRequest& txn, const std::string& key,
                     const std::string& value) {
    txn.add_success()->mutable_request_put()->set_key(key);
    txn.mutable_success()->rbegin()->mutable_request_put()->set_value(value);
  }
  static void AddDelete(etcdserverpb::TxnRequest& txn, const std::string& key,
                        const std::string& range_end = "") {
    txn.add_success()->mutable_request_delete_range()->set_key(key);
    txn.mutable_success()->rbegin()->mutable_request_delete_range()->set_range_end(range_end);
  }
  int64_t Commit(const etcdserverpb::TxnRequest& txn) {
    etcdserverpb::TxnResponse response;
    grpc::ClientContext context;
    const grpc::Status status = kv_->Txn(&context, txn, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.header().revision();
  }

  // What etcd holds under `prefix` now, less the keys under `skip`.
  std::map<std::string, std::pair<std::string, int64_t>> Read(const std::string& prefix,
                                                              const std::string& skip = "\xff") {
    etcdserverpb::RangeRequest request;
    request.set_key(prefix);
    request.set_range_end(EtcdPrefixEnd(prefix));
    etcdserverpb::RangeResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(kv_->Range(&context, request, &response).ok());
    std::map<std::string, std::pair<std::string, int64_t>> out;
    for (const etcdserverpb::KeyValue& kv : response.kvs()) {
      if (kv.key().compare(0, skip.size(), skip) == 0) continue;
      out[kv.key()] = {kv.value(), kv.mod_revision()};
    }
    return out;
  }

 private:
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
};

std::map<std::string, std::pair<std::string, int64_t>> Held(const EtcdPrefixSnapshot& snapshot) {
  std::map<std::string, std::pair<std::string, int64_t>> out;
  for (const auto& [key, held] : snapshot.keys) out[key] = {held.value, held.mod_revision};
  return out;
}

EtcdPrefixMirrorOptions Options(const std::string& prefix) {
  EtcdPrefixMirrorOptions options;
  options.prefix = prefix + "/";
  options.skip = {prefix + "/e/"};
  return options;
}

void WaitForSnapshots(const EtcdPrefixMirror& mirror, int count) {
  const absl::Time deadline = absl::Now() + kCatchUp;
  while (mirror.snapshots() < count && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GE(mirror.snapshots(), count) << "no snapshot within " << kCatchUp;
}

// Keeps the keys under one prefix as a map (what the KV view keeps decoded).
class RecordingView : public EtcdMirrorView {
 public:
  explicit RecordingView(std::string part) : part_(std::move(part)) {}
  bool Takes(const std::string& key) const override { return key.rfind(part_, 0) == 0; }
  void Put(const std::string& key, std::string value) override { held[key] = std::move(value); }
  void Delete(const std::string& key) override { held.erase(key); }
  void Settle() override { ++settled; }
  size_t size() const override { return held.size(); }

  std::map<std::string, std::string> held;
  int settled = 0;

 private:
  const std::string part_;
};

EtcdPrefixMirrorOptions OptionsWithView(const std::string& prefix) {
  EtcdPrefixMirrorOptions options = Options(prefix);
  options.new_view = [part = prefix + "/k/"] { return std::make_unique<RecordingView>(part); };
  return options;
}

TEST(EtcdPrefixMirrorTest, Start_KeysAlreadyThere_OneSnapshotOverSeveralPages) {
  const std::string prefix = EtcdTestServer::Get().NewPrefix();
  EtcdWriter etcd;
  // 2,500 keys (three pages), an event history that is not kept, and keys
  // just outside the prefix.
  for (int batch = 0; batch < 5; ++batch) {
    etcdserverpb::TxnRequest txn;
    for (int i = 0; i < 500; ++i) {
      const int n = batch * 500 + i;
      EtcdWriter::AddPut(txn, absl::StrFormat("%s/k/%05d", prefix, n), absl::StrCat("v", n));
    }
    EtcdWriter::AddPut(txn, absl::StrFormat("%s/e/%05d", prefix, batch), "history");
    etcd.Commit(txn);
  }
  etcd.Put(prefix + "0", "after the prefix");
  const int64_t last = etcd.Put(prefix + "/z", "last");
  auto mirror =
      EtcdPrefixMirror::Start(OpenEtcdChannel({EtcdTestServer::Get().endpoint()}), Options(prefix));
  absl::StatusOr<EtcdPrefixSnapshot> taken = mirror->TakeAt(last, kCatchUp);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_GE(taken->revision, last);
  EXPECT_EQ(taken->keys.size(), 2501u);
  EXPECT_EQ(Held(*taken), etcd.Read(prefix + "/", prefix + "/e/"));
  EXPECT_EQ(taken->keys.count(prefix + "/e/00000"), 0u) << "the skipped history must not be kept";
}

TEST(EtcdPrefixMirrorTest, Follow_PutsDeletesAndTransactions_EqualsEtcd) {
  const std::string prefix = EtcdTestServer::Get().NewPrefix();
  EtcdWriter etcd;
  etcd.Put(prefix + "/a", "1");
  auto mirror =
      EtcdPrefixMirror::Start(OpenEtcdChannel({EtcdTestServer::Get().endpoint()}), Options(prefix));
  WaitForSnapshots(*mirror, 1);
  etcd.Put(prefix + "/a", "2");  // overwritten
  etcd.Put(prefix + "/b", "1");
  etcd.Put(prefix + "/c", "1");
  etcd.Delete(prefix + "/b");
  for (int i = 0; i < 20; ++i) etcd.Put(absl::StrFormat("%s/r/%02d", prefix, i), "ranged");
  etcd.Delete(prefix + "/r/05", prefix + "/r/15");  // a range delete
  etcdserverpb::TxnRequest txn;  // several changes in one revision, skipped ones among them
  EtcdWriter::AddPut(txn, prefix + "/d", "txn");
  EtcdWriter::AddPut(txn, prefix + "/e/1", "history");
  EtcdWriter::AddDelete(txn, prefix + "/c");
  EtcdWriter::AddPut(txn, prefix + "/m/meta", "last of the transaction");
  etcd.Commit(txn);
  etcd.Put(prefix + "0", "outside");
  const int64_t last = etcd.Put(prefix + "/e/2", "history only");
  absl::StatusOr<EtcdPrefixSnapshot> taken = mirror->TakeAt(last, kCatchUp);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->revision, last) << "the skipped key's change moves the revision on";
  EXPECT_EQ(Held(*taken), etcd.Read(prefix + "/", prefix + "/e/"));
  EXPECT_EQ(taken->keys.size(), 13u);  // a, d, m/meta, 10 of r/
  EXPECT_EQ(mirror->snapshots(), 1);
  EXPECT_EQ(mirror->TakeAt(last, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(EtcdPrefixMirrorTest, View_SnapshotAndChanges_HandedToTheViewNotKept) {
  const std::string prefix = EtcdTestServer::Get().NewPrefix();
  EtcdWriter etcd;
  etcd.Put(prefix + "/k/1", "one");
  etcd.Put(prefix + "/k/2", "two");
  etcd.Put(prefix + "/j/x", "job");
  auto mirror = EtcdPrefixMirror::Start(OpenEtcdChannel({EtcdTestServer::Get().endpoint()}),
                                        OptionsWithView(prefix));
  WaitForSnapshots(*mirror, 1);
  EXPECT_EQ(mirror->size(), 1u) << "only j/x is kept as bytes";
  etcd.Delete(prefix + "/k/1");
  etcd.Put(prefix + "/k/2", "two again");
  etcdserverpb::TxnRequest txn;
  EtcdWriter::AddPut(txn, prefix + "/k/3", "three");
  EtcdWriter::AddPut(txn, prefix + "/j/y", "job");
  EtcdWriter::AddPut(txn, prefix + "/e/1", "history");
  const int64_t last = etcd.Commit(txn);
  absl::StatusOr<EtcdPrefixSnapshot> taken = mirror->TakeAt(last, kCatchUp);
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_NE(taken->view, nullptr);
  auto* view = dynamic_cast<RecordingView*>(taken->view.get());
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->held, (std::map<std::string, std::string>{{prefix + "/k/2", "two again"},
                                                            {prefix + "/k/3", "three"}}));
  EXPECT_GE(view->settled, 2) << "after the snapshot and after each answer";
  EXPECT_EQ(Held(*taken), etcd.Read(prefix + "/j/"));
}

TEST(EtcdPrefixMirrorTest, TakeAt_RevisionNotReached_DeadlineExceededAndFollowsOn) {
  const std::string prefix = EtcdTestServer::Get().NewPrefix();
  EtcdWriter etcd;
  const int64_t first = etcd.Put(prefix + "/a", "1");
  auto mirror =
      EtcdPrefixMirror::Start(OpenEtcdChannel({EtcdTestServer::Get().endpoint()}), Options(prefix));
  absl::StatusOr<EtcdPrefixSnapshot> early = mirror->TakeAt(first + 1000, absl::Milliseconds(300));
  EXPECT_EQ(early.status().code(), absl::StatusCode::kDeadlineExceeded) << early.status();
  int64_t last = 0;
  for (int i = 0; i < 5; ++i) last = etcd.Put(prefix + "/a", absl::StrCat("after ", i));
  absl::StatusOr<EtcdPrefixSnapshot> taken = mirror->TakeAt(last, kCatchUp);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->keys.at(prefix + "/a").value, "after 4");
  EXPECT_EQ(taken->keys.at(prefix + "/a").mod_revision, last);
}

TEST(EtcdPrefixMirrorTest, TakeAt_EtcdUnreachable_DeadlineExceededAndStopsPromptly) {
  EtcdPrefixMirrorOptions options = Options("/unreachable");
  auto mirror = EtcdPrefixMirror::Start(OpenEtcdChannel({"127.0.0.1:1"}), options);
  absl::StatusOr<EtcdPrefixSnapshot> taken = mirror->TakeAt(1, absl::Milliseconds(300));
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kDeadlineExceeded) << taken.status();
  EXPECT_NE(taken.status().message().find("first snapshot"), std::string::npos) << taken.status();
  const absl::Time stopping = absl::Now();
  mirror->Stop();
  EXPECT_LT(absl::Now() - stopping, absl::Seconds(2));
}

// The mirror reaches etcd through a proxy first (then etcd itself: gRPC
// tries the addresses in order). The proxy goes silent, etcd changes and
// compacts its history, then the proxy goes away: the watch breaks, the
// mirror watches again from where it was, etcd says that history is gone,
// and the mirror reads a fresh snapshot.
TEST(EtcdPrefixMirrorTest, Follow_HistoryCompactedWhileCutOff_FreshSnapshot) {
  if (access("/usr/bin/etcdctl", X_OK) != 0) GTEST_SKIP() << "/usr/bin/etcdctl is not installed";
  const std::string prefix = EtcdTestServer::Get().NewPrefix();
  EtcdWriter etcd;
  etcd.Put(prefix + "/a", "1");
  etcd.Put(prefix + "/b", "1");
  auto proxy = testing::TcpProxy::Start(EtcdTestServer::Get().client_port());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  etcd.Put(prefix + "/k/gone", "deleted while cut off");
  auto mirror = EtcdPrefixMirror::Start(
      OpenEtcdChannel({(*proxy)->address(), EtcdTestServer::Get().endpoint()}),
      OptionsWithView(prefix));
  WaitForSnapshots(*mirror, 1);
  const int64_t seen = etcd.Put(prefix + "/a", "2");
  const absl::Time until = absl::Now() + kCatchUp;
  while (mirror->revision() < seen && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(mirror->revision(), seen);

  (*proxy)->SetPartitioned(true);
  etcd.Delete(prefix + "/b");
  etcd.Delete(prefix + "/k/gone");
  etcd.Put(prefix + "/k/new", "1");
  etcd.Put(prefix + "/c", "1");
  const int64_t last = etcd.Put(prefix + "/a", "3");
  const std::string compact =
      absl::StrCat("ETCDCTL_API=3 /usr/bin/etcdctl --endpoints ", EtcdTestServer::Get().endpoint(),
                   " compact ", last, " >/dev/null 2>&1");
  ASSERT_EQ(std::system(compact.c_str()), 0) << compact;
  EXPECT_EQ(mirror->revision(), seen) << "cut off: nothing new arrives";
  proxy->reset();  // the connection closes; the proxy's port refuses

  WaitForSnapshots(*mirror, 2);
  absl::StatusOr<EtcdPrefixSnapshot> taken = mirror->TakeAt(last, kCatchUp);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(Held(*taken), etcd.Read(prefix + "/", prefix + "/k/"));
  EXPECT_EQ(taken->keys.count(prefix + "/b"), 0u);
  EXPECT_EQ(taken->keys.at(prefix + "/a").value, "3");
  auto* view = dynamic_cast<RecordingView*>(taken->view.get());
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->held, (std::map<std::string, std::string>{{prefix + "/k/new", "1"}}))
      << "the fresh snapshot's view, not the old one with the change missed";
}

}  // namespace
}  // namespace ddp::storage

int main(int argc, char** argv) { return ddp::storage::EtcdTestServer::RunAllTests(argc, argv); }
