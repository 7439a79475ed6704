#include "coordinator/ha/cluster_service.h"

#include <thread>

#include "common/grpc_status.h"

namespace ddp::ha {

grpc::ServerUnaryReactor* ClusterService::GetClusterStatus(
    grpc::CallbackServerContext* context, const v1::GetClusterStatusRequest* request,
    v1::ClusterStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (authorize_) {
    const absl::Status allowed = authorize_(context);
    if (!allowed.ok()) {
      reactor->Finish(ToGrpcStatus(allowed));
      return reactor;
    }
  }
  // Asking the etcd members takes up to a second: not on gRPC's threads.
  std::thread([this, reactor, response, etcd_health = request->etcd_health()] {
    *response = status_(etcd_health);
    reactor->Finish(grpc::Status::OK);
  }).detach();
  return reactor;
}

}  // namespace ddp::ha
