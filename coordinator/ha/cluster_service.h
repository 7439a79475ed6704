#ifndef DDP_COORDINATOR_HA_CLUSTER_SERVICE_H_
#define DDP_COORDINATOR_HA_CLUSTER_SERVICE_H_

// ddp.v1.ClusterService (proto/ddp/v1/cluster.proto), served by the leader
// and by a standby alike: `status` says what this coordinator knows, to the
// callers `authorize` lets through (any identity on the leader; a standby
// knows only the admin token and sends others to the leader).

#include <functional>

#include "absl/status/status.h"
#include "ddp/v1/cluster.grpc.pb.h"

namespace ddp::ha {

class ClusterService final : public v1::ClusterService::CallbackService {
 public:
  // `authorize` may add trailing metadata to the call it refuses; null: none.
  using Authorize = std::function<absl::Status(grpc::CallbackServerContext*)>;
  // `status(etcd_health)`: GetClusterStatusRequest.etcd_health.
  using Status = std::function<v1::ClusterStatus(bool etcd_health)>;
  ClusterService(Status status, Authorize authorize)
      : status_(std::move(status)), authorize_(std::move(authorize)) {}

  grpc::ServerUnaryReactor* GetClusterStatus(grpc::CallbackServerContext* context,
                                             const v1::GetClusterStatusRequest* request,
                                             v1::ClusterStatus* response) override;

 private:
  const Status status_;
  const Authorize authorize_;
};

}  // namespace ddp::ha

#endif  // DDP_COORDINATOR_HA_CLUSTER_SERVICE_H_
