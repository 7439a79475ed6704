#ifndef DDP_COORDINATOR_SERVER_HA_COORDINATOR_H_
#define DDP_COORDINATOR_SERVER_HA_COORDINATOR_H_

// A coordinator whose state is in etcd (--store etcd://...): one of the
// coordinators on the prefix leads, the others stand by.
//
//   Start --> standby (StandbyServer on the ports: redirects to the leader;
//             an EtcdPrefixMirror follows the prefix: the state kept warm)
//     --elected--> standby's listeners closed; the state taken from the
//                  mirror once it reflects the last commit (read from etcd
//                  if it does not within mirror_catch_up), into a
//                  CoordinatorServer on the same ports, its every
//                  transaction fenced by the election key --> leader
//     --lease lost / a transaction refused by the fence--> on_fatal (the
//                  process exits: its supervisor starts it again, a standby)
//   Shutdown: a leader commits what is queued, then resigns (a standby takes
//   over at once instead of after the lease); a standby just leaves.
//
// Thread-safety: port()/http_port() any time; Shutdown once, from any thread.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/ha/leader_changes.h"
#include "coordinator/ha/leader_election.h"
#include "coordinator/ha/standby_server.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/storage/etcd/etcd_prefix_mirror.h"
#include "coordinator/storage/etcd/etcd_store_spec.h"

namespace ddp::server {

struct HaCoordinatorOptions {
  // store must name etcd; its port and HTTP port are bound by the standby
  // first (0: any free port), and the leader takes them over.
  CoordinatorServerOptions server;
  // The host clients dial to reach this coordinator (in the leader key);
  // empty: the bind address, or the hostname when binding every interface.
  std::string advertise_host;
  // The leader key's lease: a dead leader is replaced after at most this.
  absl::Duration leader_lease = absl::Seconds(2);
  // How long a new leader waits for its mirror of the prefix to show the
  // last commit before it reads the state from etcd instead. A mirror that
  // follows is there at once (the last commit came a lease ago); one still
  // reading its snapshot, or cut off, is not worth more than a cold load.
  absl::Duration mirror_catch_up = absl::Seconds(1);
  // Leadership lost, or promotion failed: the process must end now (it
  // must not return). The status says why.
  std::function<void(const absl::Status&)> on_fatal;
};

class HaCoordinator {
 public:
  // Connects to etcd, binds the ports as a standby and campaigns. Errors:
  // INVALID_ARGUMENT (store is not etcd://), UNAVAILABLE (etcd unreachable),
  // those of the listeners.
  static absl::StatusOr<std::unique_ptr<HaCoordinator>> Start(HaCoordinatorOptions options);
  ~HaCoordinator();  // Shutdown()

  int port() const { return port_; }
  int http_port() const { return http_port_; }
  bool leading() const;
  void Shutdown();

 private:
  explicit HaCoordinator(HaCoordinatorOptions options) : options_(std::move(options)) {}
  void CampaignThenLead();
  absl::Status Promote();
  v1::ClusterStatus Status(bool etcd_health) const;

  const HaCoordinatorOptions options_;
  storage::EtcdStoreSpec spec_;
  v1::CoordinatorInfo self_;
  std::shared_ptr<grpc::Channel> etcd_;
  std::unique_ptr<ha::LeaderElection> election_;
  int port_ = 0;
  int http_port_ = 0;
  std::thread campaign_;

  // The role and the leader last seen (read by ClusterService calls, which
  // Stop of the standby waits for: never held across it).
  mutable absl::Mutex info_mu_;
  bool leading_ ABSL_GUARDED_BY(info_mu_) = false;
  v1::CoordinatorInfo leader_seen_ ABSL_GUARDED_BY(info_mu_);
  // Every leader seen elected, this coordinator included (thread-safe).
  ha::LeaderChanges leader_changes_;

  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<ha::StandbyServer> standby_ ABSL_GUARDED_BY(mu_);
  // While standing by: the prefix followed (taken by Promote).
  std::unique_ptr<storage::EtcdPrefixMirror> mirror_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<CoordinatorServer> server_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::server

#endif  // DDP_COORDINATOR_SERVER_HA_COORDINATOR_H_
