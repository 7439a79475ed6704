#ifndef DDP_COORDINATOR_STORAGE_ETCD_ETCD_STORE_SPEC_H_
#define DDP_COORDINATOR_STORAGE_ETCD_ETCD_STORE_SPEC_H_

// The value of `coordinator --store` naming an etcd cluster:
//   etcd://HOST:PORT[,HOST:PORT...][/PREFIX]     (PREFIX defaults to /ddp)

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp::storage {

struct EtcdStoreSpec {
  std::vector<std::string> endpoints;  // "host:port"
  std::string prefix = "/ddp";         // the keys' prefix, no trailing '/'
};

// Possible errors: INVALID_ARGUMENT naming the bad part (not etcd://, no
// endpoint, an endpoint without a port or with one outside 1..65535, an
// empty or oversized prefix).
absl::StatusOr<EtcdStoreSpec> ParseEtcdStoreSpec(absl::string_view spec);

// The gRPC target for `endpoints`: the endpoint itself when there is one,
// "ipv4:A:P,B:Q" (gRPC picks a live one) when every host is an IPv4 address,
// else the first endpoint.
std::string EtcdTarget(const std::vector<std::string>& endpoints);

}  // namespace ddp::storage

#endif  // DDP_COORDINATOR_STORAGE_ETCD_ETCD_STORE_SPEC_H_
