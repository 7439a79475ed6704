#ifndef DDP_COORDINATOR_METRICS_RPC_METRICS_H_
#define DDP_COORDINATOR_METRICS_RPC_METRICS_H_

// Per-method request metrics of the coordinator's gRPC services (REST calls
// included: the gateway calls the same methods), recorded by a server
// interceptor, so no service code changes:
//   grpc_server_started_total{grpc_service, grpc_method, grpc_type}
//   grpc_server_handled_total{grpc_service, grpc_method, grpc_type, grpc_code}
//   grpc_server_handling_seconds{grpc_service, grpc_method, grpc_type}
// in the names and labels of go-grpc-prometheus / java-grpc-prometheus, which
// Grafana's gRPC dashboards query (grpc_service is the full name,
// "ddp.v1.KeyValueService"; grpc_type unary, client_stream, server_stream or
// bidi_stream; handling time of every call, streams included), and, as
// docs/operations.md promised before them,
//   ddp_rpc_requests_total{service, method, code}     every call, at its end
//   ddp_rpc_request_duration_seconds{service, method} unary calls only
// Labels are bounded: the methods of the protos and the 17 gRPC codes.
//
// Thread-safety: thread-safe.

#include <array>
#include <atomic>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
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

  // The grpc_type label's values.
  enum class CallType { kUnary, kClientStream, kServerStream, kBidiStream };

  // `method` is the gRPC path ("/ddp.v1.KeyValueService/Put"). Started when
  // a call arrives, Record at its end.
  void Started(absl::string_view method, CallType type);
  void Record(absl::string_view method, grpc::StatusCode code, CallType type, double seconds);

  // One method's series, looked up once and kept: the per-call cost is then
  // a shared lock, a hash lookup and atomic adds.
  struct MethodSeries {
    std::atomic<prometheus::Histogram*> duration{nullptr};  // unary methods only
    std::array<std::atomic<prometheus::Counter*>, 17> by_code{};
    std::atomic<prometheus::Counter*> grpc_started{nullptr};
    std::atomic<prometheus::Histogram*> grpc_handling{nullptr};
    std::array<std::atomic<prometheus::Counter*>, 17> grpc_handled{};
  };
  MethodSeries& Series(absl::string_view method);

  // For grpc::ServerBuilder::experimental().SetInterceptorCreators; the
  // factory refers to this object, which must outlive the server.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

 private:
  prometheus::Counter& CounterFor(absl::string_view method, MethodSeries& series, int code);
  prometheus::Counter& HandledFor(absl::string_view method, CallType type, MethodSeries& series,
                                  int code);

  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& durations_;
  prometheus::Family<prometheus::Counter>& grpc_started_;
  prometheus::Family<prometheus::Counter>& grpc_handled_;
  prometheus::Family<prometheus::Histogram>& grpc_handling_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<MethodSeries>> methods_ ABSL_GUARDED_BY(mu_);
};

// "OK", "NOT_FOUND", ...: the code label's values.
std::string GrpcCodeName(grpc::StatusCode code);

}  // namespace ddp::metrics

#endif  // DDP_COORDINATOR_METRICS_RPC_METRICS_H_
