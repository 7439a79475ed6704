#ifndef DDP_COORDINATOR_HA_ETCD_HEALTH_H_
#define DDP_COORDINATOR_HA_ETCD_HEALTH_H_

// Asks every etcd member of --store for its status (Maintenance.Status, each
// over its own connection, all at once): healthy when it answers within
// `timeout`, knows a raft leader and raises no alarm.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "ddp/v1/cluster.pb.h"

namespace ddp::ha {

std::vector<v1::EtcdEndpointStatus> CheckEtcdEndpoints(const std::vector<std::string>& endpoints,
                                                       absl::Duration timeout);

}  // namespace ddp::ha

#endif  // DDP_COORDINATOR_HA_ETCD_HEALTH_H_
