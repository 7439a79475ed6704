#ifndef DDP_COORDINATOR_HA_CLUSTER_SERVICE_H_
#define DDP_COORDINATOR_HA_CLUSTER_SERVICE_H_

// ddp.v1.ClusterService (proto/ddp/v1/cluster.proto), served by the leader
// and by a standby alike: `status` says what this coordinator knows, to the
// callers `authorize` lets through (any identity on the leader; a standby
// knows only the admin token and sends others to the leader).
//
// Asking the etcd members takes up to a second, so answers are computed on one
// named thread of the service ("cluster-status"), never on gRPC's threads; at
// most max_pending calls wait for it (more: RESOURCE_EXHAUSTED). The destructor
// answers what still waits with UNAVAILABLE and joins the thread, so nothing
// outlives the service.
//
// Thread-safety: thread-safe.

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "ddp/v1/cluster.grpc.pb.h"

namespace ddp::ha {

class ClusterService final : public v1::ClusterService::CallbackService {
 public:
  // `authorize` may add trailing metadata to the call it refuses; null: none.
  using Authorize = std::function<absl::Status(grpc::CallbackServerContext*)>;
  // `status(etcd_health)`: GetClusterStatusRequest.etcd_health.
  using Status = std::function<v1::ClusterStatus(bool etcd_health)>;
  ClusterService(Status status, Authorize authorize, size_t max_pending = 64);
  ~ClusterService() override;
  ClusterService(const ClusterService&) = delete;
  ClusterService& operator=(const ClusterService&) = delete;

  grpc::ServerUnaryReactor* GetClusterStatus(grpc::CallbackServerContext* context,
                                             const v1::GetClusterStatusRequest* request,
                                             v1::ClusterStatus* response) override;

 private:
  struct Pending {
    grpc::ServerUnaryReactor* reactor;
    v1::ClusterStatus* response;
    bool etcd_health;
  };
  void AnswerLoop();

  const Status status_;
  const Authorize authorize_;
  const size_t max_pending_;
  absl::Mutex mu_;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread answerer_;  // "cluster-status"
};

}  // namespace ddp::ha

#endif  // DDP_COORDINATOR_HA_CLUSTER_SERVICE_H_
