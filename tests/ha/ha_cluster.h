#ifndef DDP_TESTS_HA_HA_CLUSTER_H_
#define DDP_TESTS_HA_HA_CLUSTER_H_

// What the HA tests and the failover benchmark run: a real etcd cluster of
// three members on loopback (Debian's etcd 3.4, fast raft timers as on a
// LAN), and a group of real coordinator processes sharing one prefix of it.
//
// Thread-safety: not thread-safe; one owner thread drives it.

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/crash/coordinator_process.h"

namespace ddp::testing {

inline constexpr char kEtcdBinary[] = "/usr/bin/etcd";

// Whether etcd is installed (tools/setup.sh installs etcd-server).
bool EtcdInstalled();

class EtcdCluster {
 public:
  // Starts `members` members under `dir` and waits until they elected a raft
  // leader. UNAVAILABLE (with the logs' tails) when they do not. With
  // `also_listen_on` (an address of this host), clients may also connect
  // there, on the same ports (endpoints_on).
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Start(const std::string& dir, int members = 3,
                                                            std::string also_listen_on = "");
  ~EtcdCluster();  // kill -9 of every member

  int size() const { return static_cast<int>(members_.size()); }
  // "127.0.0.1:PORT" of each member's client port.
  std::vector<std::string> endpoints() const;
  // "HOST:PORT" of each member's client port on `host` (also_listen_on).
  std::vector<std::string> endpoints_on(const std::string& host) const;
  // --store value: etcd://A,B,C/PREFIX.
  std::string Store(const std::string& prefix) const;
  // The member that leads raft now (-1: none answers as leader).
  int RaftLeader() const;
  void Kill9(int member);
  // Starts a killed member again on its data dir.
  absl::Status Restart(int member);
  // Waits until every running member answers and one leads.
  absl::Status WaitHealthy(absl::Duration bound) const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };
  EtcdCluster(std::string dir, std::string also_listen_on)
      : dir_(std::move(dir)), also_listen_on_(std::move(also_listen_on)) {}
  absl::Status Spawn(int member, bool existing);

  const std::string dir_;
  const std::string also_listen_on_;
  std::vector<Member> members_;
  std::string initial_cluster_;
};

// `count` coordinators on `store`, each with its own data and work dir under
// `dir` (c0, c1, ...), ports kept across restarts.
class CoordinatorGroup {
 public:
  // `customize` may change each coordinator's options (a command prefix,
  // its host) before it is made.
  CoordinatorGroup(const std::string& dir, const std::string& store, int count,
                   std::vector<std::string> extra_args = {},
                   std::function<void(CoordinatorProcessOptions&)> customize = nullptr);

  absl::Status StartAll();
  CoordinatorProcess& at(int i) { return *coordinators_[i]; }
  int size() const { return static_cast<int>(coordinators_.size()); }
  // "127.0.0.1:P0,127.0.0.1:P1,..." (the clients' --coordinator).
  std::string Targets() const;
  // The index of the coordinator that answers GetClusterStatus as LEADER,
  // polled until `bound`; -1 when none did. `other_than`: ignore that one.
  int WaitForLeader(absl::Duration bound, int other_than = -1) const;
  // What coordinator `i` answers GetClusterStatus with as its role
  // ("LEADER", "STANDBY", or the error).
  std::string RoleOf(int i) const;

 private:
  std::vector<std::unique_ptr<CoordinatorProcess>> coordinators_;
};

// `count` distinct free loopback TCP ports (0 for one that was not found).
std::vector<int> FreeLoopbackPorts(int count);

}  // namespace ddp::testing

#endif  // DDP_TESTS_HA_HA_CLUSTER_H_
