#include "coordinator/rpc/malformed_request.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/descriptor.h"

namespace ddp::rpc {
namespace {

using grpc::experimental::InterceptionHookPoints;

// "/ddp.v1.KeyValueService/Put" -> "ddp.v1.PutRequest" ("" when unknown).
std::string RequestType(const std::string& method) {
  if (method.size() < 2) return "";
  const std::string full = absl::StrReplaceAll(method.substr(1), {{"/", "."}});
  const auto* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(full);
  return descriptor == nullptr ? "" : descriptor->input_type()->full_name();
}

// On a unary or server-streaming call (WatchJob), whose one request gRPC
// parses before any service code runs. (KV Watch takes its request as bytes
// and parses it itself: nothing to rewrite there.)
class MalformedRequestInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequestInterceptor(grpc::experimental::ServerRpcInfo* info)
      : method_(info->method() != nullptr ? info->method() : "") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
          status.error_message().empty()) {
        const std::string type = RequestType(method_);
        methods->ModifySendStatus(MalformedRequest(method_, type.empty() ? "message" : type));
      }
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
};

class Factory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // Only calls whose one request gRPC parses itself; none on the streams
    // the client writes (an agent's Session, PutStream), where it would run
    // on every message for nothing.
    using Type = grpc::experimental::ServerRpcInfo::Type;
    if (info->type() != Type::UNARY && info->type() != Type::SERVER_STREAMING) return nullptr;
    return new MalformedRequestInterceptor(info);
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewMalformedRequestInterceptorFactory() {
  return std::make_unique<Factory>();
}

grpc::Status MalformedRequest(absl::string_view method, absl::string_view type) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat(method, ": the request is not a valid ", type,
                                   " (its bytes do not parse); is the client's ddp.v1 protocol "
                                   "the coordinator's?"));
}

}  // namespace ddp::rpc
