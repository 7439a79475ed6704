#ifndef DDP_COORDINATOR_STORAGE_ETCD_ETCD_STATE_STORE_H_
#define DDP_COORDINATOR_STORAGE_ETCD_ETCD_STATE_STORE_H_

// A StateStore on an etcd 3.4 cluster (the replicated engine of issue 12):
// everything under one key prefix, each CommitState ONE etcd transaction.
//
//   PREFIX/meta                  KvMetaRecord (revision, compacted, next lease)
//   PREFIX/k/HEX(ns)/HEX(key)    KeyValueRecord: a live key
//   PREFIX/e/REV16SEQ8           EventRecord: the history, in revision order
//   PREFIX/l/ID16                LeaseRecord
//   PREFIX/j/HEX(job)            StoredJobRecord (record and counters)
//   PREFIX/n/HEX(job)/HEX(node)  NodeRecord
//   PREFIX/r/HEX(job)/RUN8       StoredJobRecord of a past run
//   PREFIX/h/HEX(node)           v1::Node: the fleet's record of a node (LoadNodes)
//   PREFIX/p/quarantine          v1::QuarantinePolicy, once set (LoadQuarantinePolicy)
//   PREFIX/v/HEX(job)/INDEX16    JobEventRecord: a retained job event
//   PREFIX/c/events              JobEventCountsRecord: events ever appended
// (records: proto/ddp/state/v1/records.proto; ids hex-encoded, so any bytes
// round-trip and keys sort bytewise as the ids do). A job's new events are
// one key each in the batch's transaction; the events it no longer retains
// and those of a removed job go by a range delete in the same transaction.
//
// Every transaction compares the meta key's mod_revision with the one this
// store last wrote: a second writer on the same prefix makes the commit fail
// (FAILED_PRECONDITION) instead of interleaving. With a fence (the leader's
// election key, coordinator/ha), every transaction also requires that key to
// be the one this leader created: once deposed, it cannot write. A batch becomes one etcd
// transaction, so it must fit etcd's --max-txn-ops (default 128: run etcd with
// a larger value, e.g. 100000, as tests/etcd does) and --max-request-bytes.
//
// The store is the prefix's only writer: it keeps the job keys (not the
// events) in memory, the event counts and the KV meta. Opened from a
// standby's mirror of the prefix (OpenFromMirror), it also answers Load and
// LoadAll from the mirror's keys until its first commit, which frees them;
// Load then hands over the KV keys the standby kept decoded and indexed
// (EtcdKvView), whatever their number, without looking at each.
// A transaction never both deletes a range and writes inside it, which etcd
// refuses: the job keys are written as differences, and a range delete of
// events skips the event keys the same transaction writes (a job removed and
// started again).
//
// Thread-safety: thread-safe (one mutex).

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/commit/state_store.h"
#include "coordinator/storage/etcd/etcd_kv_records.h"
#include "coordinator/storage/etcd/etcd_prefix_mirror.h"
#include "etcd/rpc.grpc.pb.h"
#include "grpcpp/channel.h"

namespace ddp::storage {

// The key whose creation made this coordinator the leader.
struct EtcdFence {
  std::string key;
  int64_t create_revision = 0;
};

struct EtcdStateStoreOptions {
  // Of every read and transaction.
  absl::Duration timeout = absl::Seconds(5);
  // Every transaction requires it; nullopt: none (one coordinator alone).
  std::optional<EtcdFence> fence;
  // Called (once, from the committing thread, which holds the store's lock:
  // it must not call the store) when this coordinator must stop serving: a
  // transaction was refused by a guard (it is no longer the prefix's
  // writer), or its outcome stayed unknown past `timeout` of retries.
  std::function<void(const absl::Status&)> on_fatal;
};

class EtcdStateStore final : public commit::StateStore {
 public:
  // Connects to `endpoint` ("host:port") and reads what is stored under
  // `prefix`. Possible errors: UNAVAILABLE (etcd unreachable within
  // `timeout`), DATA_LOSS (a record that does not decode).
  static absl::StatusOr<std::unique_ptr<EtcdStateStore>> Open(
      const std::string& endpoint, const std::string& prefix,
      absl::Duration timeout = absl::Seconds(5));
  // The same over `channel` (OpenEtcdChannel), with options.
  static absl::StatusOr<std::unique_ptr<EtcdStateStore>> Open(
      std::shared_ptr<grpc::Channel> channel, const std::string& prefix,
      EtcdStateStoreOptions options);

  // What a mirror of `prefix` must follow for OpenFromMirror: every key but
  // the KV event history (read from etcd when a watch needs it), the KV keys
  // and leases kept in an EtcdKvView.
  static EtcdPrefixMirrorOptions MirrorOptions(const std::string& prefix);
  // The same as Open, from `mirror` (following MirrorOptions(prefix)) instead
  // of reading every key, once no one else can commit on the prefix (this
  // coordinator was elected: the fence refuses the old leader's
  // transactions). It reads the meta key, which every commit changes, as its
  // transaction's last change; waits up to `catch_up` until the mirror
  // reflects that revision; takes the mirror and checks that it holds that
  // very meta key: the store then holds exactly what etcd holds. Its meta
  // guard comes from the mirror's meta key too, so a mirror that had missed
  // a commit could not write (FAILED_PRECONDITION, on_fatal) either.
  // An empty prefix (no meta key) is read from etcd. Possible errors: those
  // of Open; DEADLINE_EXCEEDED (the mirror did not catch up in time),
  // FAILED_PRECONDITION (the mirror was stopped or taken, or holds another
  // meta key): open with Open instead.
  static absl::StatusOr<std::unique_ptr<EtcdStateStore>> OpenFromMirror(
      std::shared_ptr<grpc::Channel> channel, const std::string& prefix,
      EtcdStateStoreOptions options, EtcdPrefixMirror& mirror, absl::Duration catch_up);

  absl::Status CommitState(const commit::StateBatch& batch) override;
  absl::StatusOr<kv::PersistedKvState> Load() override;
  absl::StatusOr<std::vector<kv::Event>> ReadEvents(const std::string& ns,
                                                    const std::string& prefix,
                                                    kv::Revision from_revision,
                                                    size_t max_events) override;
  absl::Status Compact(kv::Revision revision) override;
  absl::StatusOr<std::vector<rendezvous::JobSnapshot>> LoadAll() const override;
  absl::StatusOr<rendezvous::JobEventCounts> LoadEventCounts() const override;
  absl::StatusOr<std::vector<v1::Node>> LoadNodes() const override;
  absl::StatusOr<std::optional<v1::QuarantinePolicy>> LoadQuarantinePolicy() const override;

 private:
  EtcdStateStore(std::unique_ptr<etcdserverpb::KV::Stub> stub, std::string prefix,
                 EtcdStateStoreOptions options)
      : stub_(std::move(stub)),
        prefix_(std::move(prefix)),
        timeout_(options.timeout),
        options_(std::move(options)),
        writer_id_(NewWriterId()) {}
  static std::string NewWriterId();
  // Reads meta, the job keys and the event counts from etcd (Open).
  absl::Status Init();
  // Takes meta, the job keys and the event counts from `stored` (the job
  // keys are moved out of it).
  absl::Status InitFrom(EtcdPrefixSnapshot& stored) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls `f` with every stored key under PREFIX/`part` and its value, in
  // key order: from warm_ while it is there, from etcd otherwise.
  absl::Status ForEachStored(
      const std::string& part,
      const std::function<absl::Status(const std::string& key, const std::string& value)>& f) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One page (up to 1,000 keys) of [from, end).
  absl::StatusOr<etcdserverpb::RangeResponse> RangePage(const std::string& from,
                                                        const std::string& end) const;
  // Every key/value under `prefix` (paged).
  absl::StatusOr<std::vector<etcdserverpb::KeyValue>> RangePrefix(const std::string& prefix) const;
  // One transaction: the meta guard, then `writes` (nullopt: delete).
  absl::Status Txn(const std::map<std::string, std::optional<std::string>>& writes,
                   const std::vector<std::pair<std::string, std::string>>& delete_ranges)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MetaValue(const std::string& commit) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a transaction whose answer was lost: whether the meta key holds
  // this store's commit `commit` (then it was applied; meta_mod_revision_
  // follows it).
  absl::StatusOr<bool> WasApplied(const std::string& commit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fatal(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<etcdserverpb::KV::Stub> stub_;
  const std::string prefix_;
  const absl::Duration timeout_;
  const EtcdStateStoreOptions options_;

  mutable absl::Mutex mu_;
  kv::Revision revision_ ABSL_GUARDED_BY(mu_) = 0;
  kv::Revision compacted_ ABSL_GUARDED_BY(mu_) = 0;
  kv::LeaseId next_lease_id_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t meta_mod_revision_ ABSL_GUARDED_BY(mu_) = 0;  // 0: no meta key yet
  bool fatal_ ABSL_GUARDED_BY(mu_) = false;             // on_fatal was called
  // This store's id in the meta record's last_commit, and its commits.
  const std::string writer_id_;
  int64_t commits_ ABSL_GUARDED_BY(mu_) = 0;
  // The job keys (j/, n/, r/) as stored.
  std::map<std::string, std::string> job_keys_ ABSL_GUARDED_BY(mu_);
  rendezvous::JobEventCounts event_counts_ ABSL_GUARDED_BY(mu_);
  // Opened from a mirror: its keys (KV keys, leases, job events), exactly
  // what etcd holds until this store commits; dropped at the first commit.
  std::optional<EtcdPrefixSnapshot> warm_ ABSL_GUARDED_BY(mu_);
  // Opened from a mirror made with MirrorOptions: the KV keys and leases,
  // decoded and indexed by the standby; taken whole by Load.
  std::unique_ptr<EtcdKvView> warm_kv_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_ETCD_ETCD_STATE_STORE_H_
