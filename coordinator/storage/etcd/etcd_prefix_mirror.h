#ifndef DDP_COORDINATOR_STORAGE_ETCD_ETCD_PREFIX_MIRROR_H_
#define DDP_COORDINATOR_STORAGE_ETCD_ETCD_PREFIX_MIRROR_H_

// A copy in memory of what etcd holds under a key prefix, kept current by
// following it: a standby coordinator keeps one, so that when it is elected
// it opens the state store from memory (EtcdStateStore::OpenFromMirror)
// instead of reading every key of the prefix from etcd.
//
//   Start --> snapshot: every key of the prefix, read page by page at ONE
//      ^      etcd revision R (the first page's)
//      |        |
//      |        v
//      |      following: an etcd Watch of the prefix from revision R + 1;
//      |      each answer's changes applied in order, then revision() moves
//      |      to the last change's revision
//      |        |  the watch broke (a member died, a connection dropped):
//      |        |  watched again from revision() + 1 (etcd keeps history)
//      +--------+  etcd compacted its history past revision() + 1: a fresh
//                  snapshot (the changes in between are gone)
//   TakeAt(rev): waits until revision() >= rev, stops, hands the keys over.
//
// What it holds after applying revision N is exactly what etcd held under
// the prefix at N (less the `skip` keys): a snapshot is one revision's
// state, and etcd's watch delivers every change after it, in revision order,
// never one revision split over two answers.
//
// Keys under a `skip` prefix are not kept (the KV event history, which only
// grows), but their changes still move revision() on. Keys a view takes
// (EtcdMirrorView: the KV keys, kept decoded and indexed as the coordinator
// serves them) are handed to it instead of being kept as bytes, so that
// what a promotion takes over is ready to serve, whatever its size.
//
// Thread-safety: thread-safe. One "etcd-mirror" thread reads etcd; TakeAt and
// Stop from any thread.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/rpc.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace ddp::storage {

// The first key after every key that starts with `prefix` (etcd's "prefix
// end", a range_end: the last byte below 0xff incremented, what follows it
// dropped; "\0", every key, when there is none).
std::string EtcdPrefixEnd(std::string prefix);

// One key as etcd stores it.
struct EtcdMirroredValue {
  std::string value;
  int64_t mod_revision = 0;
};

// Part of the prefix kept in another form than bytes (decoded, indexed) as
// the mirror follows it. A mirror makes a new view for each snapshot and
// hands it over with the keys (TakeAt); the mirror's thread is the only one
// that calls it until then.
class EtcdMirrorView {
 public:
  virtual ~EtcdMirrorView() = default;
  // Whether `key` (a full key) is this view's: then it is handed to Put and
  // Delete and not kept as bytes.
  virtual bool Takes(const std::string& key) const = 0;
  // A key of this view, read in a snapshot or put since. A value the view
  // cannot take is remembered by the view and reported when it is used: the
  // mirror goes on.
  virtual void Put(const std::string& key, std::string value) = 0;
  virtual void Delete(const std::string& key) = 0;
  // After each group of changes (a snapshot, one answer of the watch).
  virtual void Settle() {}
  // The keys it holds (for the log).
  virtual size_t size() const = 0;
};

// The keys of a prefix at one etcd revision.
struct EtcdPrefixSnapshot {
  // Every change of the prefix up to this revision is in `keys` (and
  // `view`), none after.
  int64_t revision = 0;
  // Full key -> value, bytewise order (as etcd orders them); less the keys
  // the view takes.
  std::map<std::string, EtcdMirroredValue> keys;
  // The options' new_view's, fed with this revision's keys (null: none).
  std::unique_ptr<EtcdMirrorView> view;
};

struct EtcdPrefixMirrorOptions {
  // The keys followed: every key that starts with it (e.g. "/ddp/").
  std::string prefix;
  // Keys under these (full) prefixes are not kept.
  std::vector<std::string> skip;
  // Of each Range.
  absl::Duration rpc_timeout = absl::Seconds(5);
  // Before reading or watching again after etcd failed to answer.
  absl::Duration retry_pause = absl::Milliseconds(100);
  // Makes the view a snapshot's keys are fed to (unset: no view, every key
  // kept as bytes).
  std::function<std::unique_ptr<EtcdMirrorView>()> new_view;
};

class EtcdPrefixMirror {
 public:
  // Starts following `options.prefix` over `etcd` (in the background: an
  // etcd that does not answer is retried until Stop).
  static std::unique_ptr<EtcdPrefixMirror> Start(std::shared_ptr<grpc::Channel> etcd,
                                                 EtcdPrefixMirrorOptions options);
  ~EtcdPrefixMirror();  // Stop()
  EtcdPrefixMirror(const EtcdPrefixMirror&) = delete;
  EtcdPrefixMirror& operator=(const EtcdPrefixMirror&) = delete;

  // The etcd revision the keys held reflect (0: no snapshot yet).
  int64_t revision() const;
  // Keys held as bytes now (a snapshot's, then followed; not the view's).
  size_t size() const;
  // Snapshots read since Start (the first, then one per compaction).
  int snapshots() const;

  // Blocks until the mirror reflects `revision` or later, then stops
  // following and hands over what it holds (once: the mirror is empty after
  // it). Possible errors: DEADLINE_EXCEEDED (not there within `timeout`:
  // etcd slow or unreachable, or a snapshot still being read; the mirror
  // goes on), FAILED_PRECONDITION (stopped, or already taken).
  absl::StatusOr<EtcdPrefixSnapshot> TakeAt(int64_t revision, absl::Duration timeout);

  // Stops following (waits for the thread). Idempotent.
  void Stop();

 private:
  EtcdPrefixMirror(std::shared_ptr<grpc::Channel> etcd, EtcdPrefixMirrorOptions options);
  void Run();
  // Reads every key of the prefix at one revision into a new snapshot.
  absl::StatusOr<EtcdPrefixSnapshot> ReadSnapshot();
  // Watches from revision_ + 1 and applies changes until the watch ends.
  // OUT_OF_RANGE: etcd compacted past it (a snapshot is needed); CANCELLED:
  // Stop; UNAVAILABLE: the watch broke.
  absl::Status Follow();
  bool Kept(const std::string& key) const;
  // Applies one change (a snapshot's key, a watch event) to `to`: to its view
  // if the view takes the key, to its keys otherwise (nullopt: deleted).
  void Apply(EtcdPrefixSnapshot& to, std::string key, std::optional<std::string> value,
             int64_t mod_revision) const;
  bool stopping() const;

  const EtcdPrefixMirrorOptions options_;
  const std::string range_end_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch_;

  mutable absl::Mutex mu_;
  // What the last snapshot and the changes since made (revision 0: none).
  EtcdPrefixSnapshot state_ ABSL_GUARDED_BY(mu_);
  int snapshots_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool taken_ ABSL_GUARDED_BY(mu_) = false;
  // The call in flight, cancelled by Stop.
  grpc::ClientContext* call_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread thread_;
};

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_ETCD_ETCD_PREFIX_MIRROR_H_
