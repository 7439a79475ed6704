#include "coordinator/metrics/rpc_metrics.h"

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"

namespace ddp::metrics {
namespace {

using grpc::experimental::InterceptionHookPoints;

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  return *buckets;
}

// One per call: notes the start, records at the status.
class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(RpcMetrics& metrics, grpc::experimental::ServerRpcInfo* info)
      : metrics_(metrics),
        method_(info->method() != nullptr ? info->method() : ""),
        unary_(info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY),
        start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
      metrics_.Record(method_, methods->GetSendStatus().error_code(), unary_, elapsed.count());
    }
    methods->Proceed();
  }

 private:
  RpcMetrics& metrics_;
  const std::string method_;
  const bool unary_;
  const std::chrono::steady_clock::time_point start_;
};

class MetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(RpcMetrics& metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, info);
  }

 private:
  RpcMetrics& metrics_;
};

}  // namespace

std::string GrpcCodeName(grpc::StatusCode code) {
  // gRPC's and Abseil's codes have the same numbers and names.
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

RpcMetrics::RpcMetrics(prometheus::Registry& registry)
    : requests_(prometheus::BuildCounter()
                    .Name("ddp_rpc_requests_total")
                    .Help("gRPC and REST requests by service, method and final gRPC code")
                    .Register(registry)),
      durations_(prometheus::BuildHistogram()
                     .Name("ddp_rpc_request_duration_seconds")
                     .Help("Time from the arrival of a unary request to its reply, durable "
                           "writes included")
                     .Register(registry)) {}

namespace {

// "/ddp.v1.KeyValueService/Put" -> {"KeyValueService", "Put"}.
std::pair<std::string, std::string> ServiceAndMethod(absl::string_view path) {
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  if (parts.size() != 3) return {"unknown", std::string(path)};
  absl::string_view service = parts[1];
  const size_t dot = service.rfind('.');
  if (dot != absl::string_view::npos) service.remove_prefix(dot + 1);
  return {std::string(service), std::string(parts[2])};
}

}  // namespace

RpcMetrics::MethodSeries& RpcMetrics::Series(absl::string_view method) {
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = methods_.find(method);
    if (it != methods_.end()) return *it->second;
  }
  absl::MutexLock lock(&mu_);
  auto& slot = methods_[method];
  if (slot == nullptr) slot = std::make_unique<MethodSeries>();
  return *slot;
}

prometheus::Counter& RpcMetrics::CounterFor(absl::string_view method, MethodSeries& series,
                                            int code) {
  prometheus::Counter* counter = series.by_code[code].load(std::memory_order_acquire);
  if (counter != nullptr) return *counter;
  auto [service, name] = ServiceAndMethod(method);
  // Family::Add returns the same counter for the same labels, so a race here
  // only repeats the lookup.
  counter = &requests_.Add({{"service", service},
                            {"method", name},
                            {"code", GrpcCodeName(static_cast<grpc::StatusCode>(code))}});
  series.by_code[code].store(counter, std::memory_order_release);
  return *counter;
}

void RpcMetrics::Record(absl::string_view method, grpc::StatusCode code, bool unary,
                        double seconds) {
  MethodSeries& series = Series(method);
  const int index = static_cast<int>(code);
  CounterFor(method, series, index >= 0 && index < 17 ? index : 2).Increment();
  if (!unary) return;
  prometheus::Histogram* duration = series.duration.load(std::memory_order_acquire);
  if (duration == nullptr) {
    auto [service, name] = ServiceAndMethod(method);
    duration = &durations_.Add({{"service", service}, {"method", name}}, LatencyBuckets());
    series.duration.store(duration, std::memory_order_release);
  }
  duration->Observe(seconds);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
RpcMetrics::InterceptorFactory() {
  return std::make_unique<MetricsInterceptorFactory>(*this);
}

}  // namespace ddp::metrics
