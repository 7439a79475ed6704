// EtcdStateStore against a real etcd 3.4 (Debian's etcd-server, started by
// this test on loopback ports with its own data dir): both conformance suites
// (KvBackend and JobStateStore), opened by reading etcd and opened from a
// mirror of the prefix (what a standby does when elected), and the guard
// against a second writer.
// Without /usr/bin/etcd the test says so and does nothing (tools/setup.sh
// installs it).

#include "coordinator/storage/etcd/etcd_state_store.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/storage/etcd/etcd_channel.h"
#include "coordinator/storage/etcd/etcd_prefix_mirror.h"
#include "coordinator/storage/etcd/testing/etcd_test_server.h"
#include "coordinator/storage/job_state_store_conformance.h"
#include "coordinator/storage/kv_backend_conformance.h"
#include "coordinator/storage/node_records_conformance.h"
#include "etcd/rpc.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"

namespace ddp::storage {
namespace {

using Etcd = EtcdTestServer;

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

// Each open: a mirror of the prefix started, then the store opened from it,
// as a standby does when it is elected (the first open of a test finds the
// prefix empty and reads etcd; every reopen is from the mirror).
template <typename Interface>
class EtcdFromMirrorFactory {
 public:
  absl::StatusOr<std::unique_ptr<Interface>> Open() {
    auto channel = OpenEtcdChannel({Etcd::Get().endpoint()});
    auto mirror = EtcdPrefixMirror::Start(channel, EtcdStateStore::MirrorOptions(prefix_));
    absl::StatusOr<std::unique_ptr<EtcdStateStore>> store = EtcdStateStore::OpenFromMirror(
        channel, prefix_, EtcdStateStoreOptions(), *mirror, absl::Seconds(10));
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

namespace conf = rendezvous::conformance;

// One KV batch at `revision`: key k<revision % 20> written (a put event),
// every seventh revision k<revision % 5> deleted instead; a lease granted at
// 10 (the key of 11 attached to it), revoked at 100.
kv::KvWriteBatch KvBatch(kv::Revision revision) {
  kv::KvWriteBatch batch;
  batch.revision = revision;
  kv::KeyValue kv{"ns",
                  absl::StrCat("k", revision % 20),
                  absl::StrCat("v", revision),
                  revision,
                  revision,
                  1,
                  revision == 11 ? 1 : 0};
  if (revision % 7 == 0) {
    kv.key = absl::StrCat("k", revision % 5);
    batch.deletes.emplace_back(kv.ns, kv.key);
    batch.events.push_back(kv::Event{kv::EventType::kDelete, kv});
  } else {
    batch.upserts.push_back(kv);
    batch.events.push_back(kv::Event{kv::EventType::kPut, kv});
  }
  if (revision == 10) {
    batch.lease_grants.push_back(kv::LeaseRecord{1, 5000});
    batch.next_lease_id = 2;
  }
  if (revision == 100) batch.lease_revokes.push_back(1);
  return batch;
}

void ExpectSameJobs(const std::vector<rendezvous::JobSnapshot>& got,
                    const std::vector<rendezvous::JobSnapshot>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    conf::ExpectSameRecord(got[i].job, want[i].job);
    ASSERT_EQ(got[i].nodes.size(), want[i].nodes.size());
    for (size_t n = 0; n < got[i].nodes.size(); ++n) {
      EXPECT_EQ(conf::FieldsOf(got[i].nodes[n]), conf::FieldsOf(want[i].nodes[n]));
    }
    EXPECT_EQ(got[i].past_runs.size(), want[i].past_runs.size());
    ASSERT_EQ(got[i].events.size(), want[i].events.size());
    for (size_t e = 0; e < got[i].events.size(); ++e) {
      EXPECT_EQ(conf::FieldsOf(got[i].events[e]), conf::FieldsOf(want[i].events[e]));
    }
  }
}

// A standby's mirror, started before the leader commits, follows its
// commits through the watch (KV writes, deletes, a lease, jobs, job events
// and their trimming, a removed job); once the leader stopped, a store opened
// from the mirror holds what a store reading etcd holds, and its first
// commit passes the meta guard.
TEST(EtcdStateStoreTest, OpenFromMirror_FollowedTheCommits_SameStateAsReadingEtcd) {
  const std::string prefix = Etcd::Get().NewPrefix();
  auto channel = OpenEtcdChannel({Etcd::Get().endpoint()});
  auto mirror = EtcdPrefixMirror::Start(channel, EtcdStateStore::MirrorOptions(prefix));
  // Its snapshot (of the empty prefix) first, so that every commit below
  // reaches it through the watch.
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (mirror->snapshots() == 0 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(mirror->snapshots(), 1);
  ASSERT_EQ(mirror->size(), 0u);
  {
    auto leader = EtcdStateStore::Open(channel, prefix, EtcdStateStoreOptions());
    ASSERT_TRUE(leader.ok()) << leader.status();
    ASSERT_TRUE(
        (*leader)->Apply(conf::CreateJob(conf::FullRecord("a"), {conf::Node("n1", 0)})).ok());
    ASSERT_TRUE((*leader)->Apply(conf::CreateJob(conf::FullRecord("b"))).ok());
    for (kv::Revision r = 1; r <= 200; ++r) {
      commit::StateBatch batch{KvBatch(r), {}};
      if (r % 10 == 0) {
        rendezvous::JobChanges events = conf::NodeChanges("a", {conf::Node("n2", 1)});
        events.appended_events = conf::Events("a", r / 10 * 3 - 2, r / 10 * 3);
        if (r == 150) events.drop_events_before = 20;
        batch.jobs.push_back(std::move(events));
      }
      if (r == 120) {
        rendezvous::JobChanges removed;
        removed.job_id = "b";
        removed.job_removed = true;
        batch.jobs.push_back(std::move(removed));
      }
      ASSERT_TRUE((*leader)->CommitState(batch).ok()) << "revision " << r;
    }
  }
  auto cold = EtcdStateStore::Open(channel, prefix, EtcdStateStoreOptions());
  ASSERT_TRUE(cold.ok()) << cold.status();
  auto warm = EtcdStateStore::OpenFromMirror(channel, prefix, EtcdStateStoreOptions(), *mirror,
                                             absl::Seconds(10));
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_EQ(mirror->snapshots(), 1) << "followed by the watch, not read again";

  absl::StatusOr<kv::PersistedKvState> want = (*cold)->Load(), got = (*warm)->Load();
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->revision, 200);
  EXPECT_EQ(got->revision, want->revision);
  EXPECT_EQ(got->next_lease_id, want->next_lease_id);
  EXPECT_EQ(kv::conformance::SortedKeys(got->keys), kv::conformance::SortedKeys(want->keys));
  std::set<std::string> live;  // what the batches leave
  for (kv::Revision r = 1; r <= 200; ++r) {
    for (const kv::KeyValue& kv : KvBatch(r).upserts) live.insert(kv.key);
    for (const auto& deleted : KvBatch(r).deletes) live.erase(deleted.second);
  }
  EXPECT_EQ(got->keys.size(), live.size());
  EXPECT_EQ(kv::conformance::SortedLeases(got->leases),
            kv::conformance::SortedLeases(want->leases));
  absl::StatusOr<std::vector<rendezvous::JobSnapshot>> want_jobs = (*cold)->LoadAll(),
                                                       got_jobs = (*warm)->LoadAll();
  ASSERT_TRUE(want_jobs.ok() && got_jobs.ok());
  ASSERT_EQ(got_jobs->size(), 1u);
  EXPECT_EQ(got_jobs->front().events.size(), 41u);  // 20..60
  ExpectSameJobs(*got_jobs, *want_jobs);
  EXPECT_TRUE(*(*warm)->LoadEventCounts() == *(*cold)->LoadEventCounts());

  ASSERT_TRUE((*warm)->Commit(KvBatch(201)).ok()) << "the meta guard of the mirror's meta key";
  auto after = EtcdStateStore::Open(channel, prefix, EtcdStateStoreOptions());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)->Load()->revision, 201);
}

// A mirror that cannot show the last commit is refused, never served: the
// caller reads etcd instead.
TEST(EtcdStateStoreTest, OpenFromMirror_MirrorStoppedOrBehind_Refused) {
  const std::string prefix = Etcd::Get().NewPrefix();
  auto channel = OpenEtcdChannel({Etcd::Get().endpoint()});
  auto leader = EtcdStateStore::Open(channel, prefix, EtcdStateStoreOptions());
  ASSERT_TRUE(leader.ok()) << leader.status();
  ASSERT_TRUE((*leader)->Commit(KvBatch(1)).ok());

  auto stopped = EtcdPrefixMirror::Start(channel, EtcdStateStore::MirrorOptions(prefix));
  stopped->Stop();
  auto from_stopped = EtcdStateStore::OpenFromMirror(channel, prefix, EtcdStateStoreOptions(),
                                                     *stopped, absl::Seconds(1));
  EXPECT_EQ(from_stopped.status().code(), absl::StatusCode::kFailedPrecondition)
      << from_stopped.status();

  // A mirror cut off from etcd (it reaches no member) stays behind.
  auto cut_off = EtcdPrefixMirror::Start(OpenEtcdChannel({"127.0.0.1:1"}),
                                         EtcdStateStore::MirrorOptions(prefix));
  auto from_behind = EtcdStateStore::OpenFromMirror(channel, prefix, EtcdStateStoreOptions(),
                                                    *cut_off, absl::Milliseconds(300));
  EXPECT_EQ(from_behind.status().code(), absl::StatusCode::kDeadlineExceeded)
      << from_behind.status();
}

}  // namespace
}  // namespace ddp::storage

namespace ddp::kv {
namespace {
using EtcdKvFactory = storage::EtcdFactory<KvBackend>;
INSTANTIATE_TYPED_TEST_SUITE_P(Etcd, KvBackendConformanceTest, EtcdKvFactory);
using EtcdFromMirrorKvFactory = storage::EtcdFromMirrorFactory<KvBackend>;
INSTANTIATE_TYPED_TEST_SUITE_P(EtcdFromMirror, KvBackendConformanceTest, EtcdFromMirrorKvFactory);
}  // namespace
}  // namespace ddp::kv

namespace ddp::rendezvous {
namespace {
using EtcdJobFactory = storage::EtcdFactory<JobStateStore>;
INSTANTIATE_TYPED_TEST_SUITE_P(Etcd, JobStateStoreConformanceTest, EtcdJobFactory);
using EtcdFromMirrorJobFactory = storage::EtcdFromMirrorFactory<JobStateStore>;
INSTANTIATE_TYPED_TEST_SUITE_P(EtcdFromMirror, JobStateStoreConformanceTest,
                               EtcdFromMirrorJobFactory);
}  // namespace
}  // namespace ddp::rendezvous

int main(int argc, char** argv) { return ddp::storage::EtcdTestServer::RunAllTests(argc, argv); }

namespace ddp::storage::conformance {
namespace {
using EtcdStateFactory = storage::EtcdFactory<commit::StateStore>;
INSTANTIATE_TYPED_TEST_SUITE_P(Etcd, NodeRecordsConformanceTest, EtcdStateFactory);
using EtcdFromMirrorStateFactory = storage::EtcdFromMirrorFactory<commit::StateStore>;
INSTANTIATE_TYPED_TEST_SUITE_P(EtcdFromMirror, NodeRecordsConformanceTest,
                               EtcdFromMirrorStateFactory);
}  // namespace
}  // namespace ddp::storage::conformance
