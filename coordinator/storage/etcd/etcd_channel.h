#ifndef DDP_COORDINATOR_STORAGE_ETCD_ETCD_CHANNEL_H_
#define DDP_COORDINATOR_STORAGE_ETCD_ETCD_CHANNEL_H_

// The one way this program dials etcd: a gRPC channel to the members of
// --store, with keepalive pings so that a member that vanished (host down,
// network partition) is noticed within seconds rather than at TCP's timeout,
// and gRPC picking a live member among IPv4 endpoints (EtcdTarget).

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace ddp::storage {

std::shared_ptr<grpc::Channel> OpenEtcdChannel(const std::vector<std::string>& endpoints);

// `timeout` from now, as a gRPC deadline.
inline std::chrono::system_clock::time_point EtcdDeadline(absl::Duration timeout) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout));
}

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_ETCD_ETCD_CHANNEL_H_
