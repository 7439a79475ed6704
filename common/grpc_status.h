#ifndef DDP_COMMON_GRPC_STATUS_H_
#define DDP_COMMON_GRPC_STATUS_H_

// The one place that converts between absl::Status and grpc::Status. The code and the
// message travel unchanged in both directions. Only transport code includes this.

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace ddp {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ddp

#endif  // DDP_COMMON_GRPC_STATUS_H_
