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
        type_(TypeOf(info->type())),
        start_(std::chrono::steady_clock::now()) {
    metrics_.Started(method_, type_);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
      metrics_.Record(method_, methods->GetSendStatus().error_code(), type_, elapsed.count());
    }
    methods->Proceed();
  }

 private:
  static RpcMetrics::CallType TypeOf(grpc::experimental::ServerRpcInfo::Type type) {
    using Type = grpc::experimental::ServerRpcInfo::Type;
    switch (type) {
      case Type::CLIENT_STREAMING:
        return RpcMetrics::CallType::kClientStream;
      case Type::SERVER_STREAMING:
        return RpcMetrics::CallType::kServerStream;
      case Type::BIDI_STREAMING:
        return RpcMetrics::CallType::kBidiStream;
      default:
        return RpcMetrics::CallType::kUnary;
    }
  }

  RpcMetrics& metrics_;
  const std::string method_;
  const RpcMetrics::CallType type_;
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
                     .Register(registry)),
      grpc_started_(prometheus::BuildCounter()
                        .Name("grpc_server_started_total")
                        .Help("Total number of RPCs started on the server.")
                        .Register(registry)),
      grpc_handled_(prometheus::BuildCounter()
                        .Name("grpc_server_handled_total")
                        .Help("Total number of RPCs completed on the server, regardless of "
                              "success or failure.")
                        .Register(registry)),
      grpc_handling_(prometheus::BuildHistogram()
                         .Name("grpc_server_handling_seconds")
                         .Help("Histogram of response latency (seconds) of gRPC that had been "
                               "application-level handled by the server.")
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

// "/ddp.v1.KeyValueService/Put" -> {"ddp.v1.KeyValueService", "Put"}.
std::pair<std::string, std::string> FullServiceAndMethod(absl::string_view path) {
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  if (parts.size() != 3) return {"unknown", std::string(path)};
  return {std::string(parts[1]), std::string(parts[2])};
}

const char* TypeName(RpcMetrics::CallType type) {
  switch (type) {
    case RpcMetrics::CallType::kClientStream:
      return "client_stream";
    case RpcMetrics::CallType::kServerStream:
      return "server_stream";
    case RpcMetrics::CallType::kBidiStream:
      return "bidi_stream";
    case RpcMetrics::CallType::kUnary:
      break;
  }
  return "unary";
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

prometheus::Counter& RpcMetrics::HandledFor(absl::string_view method, CallType type,
                                            MethodSeries& series, int code) {
  prometheus::Counter* counter = series.grpc_handled[code].load(std::memory_order_acquire);
  if (counter != nullptr) return *counter;
  auto [service, name] = FullServiceAndMethod(method);
  counter = &grpc_handled_.Add({{"grpc_service", service},
                                {"grpc_method", name},
                                {"grpc_type", TypeName(type)},
                                {"grpc_code", GrpcCodeName(static_cast<grpc::StatusCode>(code))}});
  series.grpc_handled[code].store(counter, std::memory_order_release);
  return *counter;
}

void RpcMetrics::Started(absl::string_view method, CallType type) {
  MethodSeries& series = Series(method);
  prometheus::Counter* started = series.grpc_started.load(std::memory_order_acquire);
  if (started == nullptr) {
    auto [service, name] = FullServiceAndMethod(method);
    started = &grpc_started_.Add(
        {{"grpc_service", service}, {"grpc_method", name}, {"grpc_type", TypeName(type)}});
    series.grpc_started.store(started, std::memory_order_release);
  }
  started->Increment();
}

void RpcMetrics::Record(absl::string_view method, grpc::StatusCode code, CallType type,
                        double seconds) {
  MethodSeries& series = Series(method);
  int index = static_cast<int>(code);
  if (index < 0 || index >= 17) index = 2;  // UNKNOWN
  CounterFor(method, series, index).Increment();
  HandledFor(method, type, series, index).Increment();
  prometheus::Histogram* handling = series.grpc_handling.load(std::memory_order_acquire);
  if (handling == nullptr) {
    auto [service, name] = FullServiceAndMethod(method);
    handling = &grpc_handling_.Add(
        {{"grpc_service", service}, {"grpc_method", name}, {"grpc_type", TypeName(type)}},
        LatencyBuckets());
    series.grpc_handling.store(handling, std::memory_order_release);
  }
  handling->Observe(seconds);
  if (type != CallType::kUnary) return;
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
