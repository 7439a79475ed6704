#ifndef DDP_COORDINATOR_HA_LEADER_ELECTION_H_
#define DDP_COORDINATOR_HA_LEADER_ELECTION_H_

// One coordinator's candidacy in the election of the coordinators that share
// an etcd prefix (etcd's own recipe, as its concurrency.Election does it):
//
//   * the candidate holds an etcd lease of `lease_ttl`, renewed every
//     ttl/4 by a keep-alive;
//   * it leads when it creates PREFIX/leader, attached to that lease, in a
//     transaction that requires the key to be absent; the key's value says
//     who leads (a ddp.v1.CoordinatorInfo) and its create revision is the
//     fence every state transaction of the leader compares (EtcdFence);
//   * the others watch the key and campaign again when it is deleted (the
//     leader resigned, or its lease expired because it died or was cut off).
//
//   Create --> candidate --Campaign: key created--> leader --lease lost--> lost
//                 |  ^                                 |                (on_lost)
//                 |  +--key deleted (watch)-------+    +--Resign--> resigned
//                 +--another leads: on_leader(info)
//
// A leader stops being one locally before etcd can expire its lease: its
// lease counts from when the last answered keep-alive was SENT (etcd counts
// from when it received it), less a tenth of the TTL, and no keep-alive waits
// past that point, so on_lost fires while the key still exists and before a
// rival can be elected. A keep-alive answered with TTL 0 (the
// lease is gone) fires it at once.
//
// Thread-safety: thread-safe. Campaign blocks (call it from one thread);
// Stop may come from any thread and ends a Campaign with CANCELLED. The
// callbacks run on internal threads and must not call Campaign.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/storage/etcd/etcd_state_store.h"
#include "ddp/v1/cluster.pb.h"
#include "etcd/rpc.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace ddp::ha {

struct LeaderElectionOptions {
  // PREFIX (of --store, no trailing '/'): the key is PREFIX/leader.
  std::string prefix = "/ddp";
  // Who this candidate is, as the others will see it when it leads.
  v1::CoordinatorInfo self;
  // The lease of the leader key; etcd may raise it to its minimum (1.5 x its
  // election timeout). A dead leader is replaced after at most this long.
  absl::Duration lease_ttl = absl::Seconds(2);
  // Of each etcd call.
  absl::Duration rpc_timeout = absl::Seconds(2);
  // How long Create waits for etcd to answer at all.
  absl::Duration connect_timeout = absl::Seconds(5);
  // Another coordinator leads (or none: an empty info), as etcd says.
  std::function<void(const v1::CoordinatorInfo&)> on_leader;
  // This candidate led and no longer does (its lease ran out or is gone).
  // Called once, from the keep-alive thread.
  std::function<void(const absl::Status&)> on_lost;
};

class LeaderElection {
 public:
  // Grants the lease and starts keeping it alive. Errors: UNAVAILABLE (etcd
  // did not answer within connect_timeout; the message names the target).
  static absl::StatusOr<std::unique_ptr<LeaderElection>> Create(std::shared_ptr<grpc::Channel> etcd,
                                                                LeaderElectionOptions options);
  ~LeaderElection();  // Stop(), then Resign() if leading
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // Blocks until this candidate leads (OK), Stop() (CANCELLED) or its lease
  // is lost (ABORTED). etcd errors are retried.
  absl::Status Campaign();
  // While leading: the key and revision every write must be fenced with.
  storage::EtcdFence fence() const;
  // OK while this candidate leads and its lease is still valid at this very
  // moment, on CLOCK_MONOTONIC (a pause of the process counts; etcd's
  // fence only guards writes); UNAVAILABLE otherwise. Asked before answers
  // that only the leader may give and that no write fences: a renewal of an
  // agent's lease, a read.
  absl::Status CheckLeading() const;
  // The lease as etcd granted it.
  absl::Duration lease_ttl() const;
  // Deletes the leader key (if this candidate still holds it) and revokes
  // the lease, so that a standby takes over at once. Best effort.
  void Resign();
  // Ends Campaign and the keep-alive.
  void Stop();

 private:
  LeaderElection(std::shared_ptr<grpc::Channel> etcd, LeaderElectionOptions options);
  // A new lease (the candidate's first, or after its old one ran out).
  absl::Status GrantLease(absl::Duration timeout);
  void KeepAliveLoop();
  // One keep-alive; the TTL etcd answered (0: the lease is gone).
  absl::StatusOr<int64_t> KeepAliveOnce();
  // Creates the key unless it exists; the existing key otherwise.
  absl::StatusOr<etcdserverpb::TxnResponse> TryCreate();
  // Reports the leader in `kv` and blocks until the key changes after it
  // (deleted: returns; rewritten: reports again), or Stop().
  absl::Status WatchLeader(const etcdserverpb::KeyValue& kv);
  // While leading: marks the leadership lost, calls on_lost, returns true.
  // Otherwise returns false.
  bool Lost(const absl::Status& why);
  bool stopping() const;

  const LeaderElectionOptions options_;
  const std::string key_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease_;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch_;

  mutable absl::Mutex mu_;
  int64_t lease_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration ttl_ ABSL_GUARDED_BY(mu_);
  // End of the lease: send time of the last answered keep-alive + TTL.
  absl::Time lease_end_ ABSL_GUARDED_BY(mu_);
  // When this candidate stops counting on the lease: a tenth of the TTL
  // before lease_end_ (scheduling delays, clock rates).
  absl::Time LocalEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return lease_end_ - ttl_ / 10; }
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t fence_revision_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::ClientContext* watch_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread keepalive_;
};

}  // namespace ddp::ha

#endif  // DDP_COORDINATOR_HA_LEADER_ELECTION_H_
