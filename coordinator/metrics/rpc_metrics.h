#ifndef DDP_COORDINATOR_METRICS_RPC_METRICS_H_
#define DDP_COORDINATOR_METRICS_RPC_METRICS_H_

// Per-method request metrics of the coordinator's gRPC services (REST calls
// included: the gateway calls the same methods), recorded by a server
// interceptor, so no service code changes:
//   ddp_rpc_requests_total{service, method, code}     every call, at its end
//   ddp_rpc_request_duration_seconds{service, method} unary calls only
// Labels are bounded: the methods of the protos and the 17 gRPC codes.
//
// Thread-safety: thread-safe.

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ddp::metrics {

class RpcMetrics {
 public:
  explicit RpcMetrics(prometheus::Registry& registry);

  // `method` is the gRPC path ("/ddp.v1.KeyValueService/Put").
  void Record(absl::string_view method, grpc::StatusCode code, bool unary, double seconds);

  // For grpc::ServerBuilder::experimental().SetInterceptorCreators; the
  // factory refers to this object, which must outlive the server.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& durations_;
};

// "OK", "NOT_FOUND", ...: the code label's values.
const char* GrpcCodeName(grpc::StatusCode code);

}  // namespace ddp::metrics

#endif  // DDP_COORDINATOR_METRICS_RPC_METRICS_H_
