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

class MalformedRequestInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequestInterceptor(grpc::experimental::ServerRpcInfo* info)
      : method_(info->method() != nullptr ? info->method() : ""),
        one_request_(info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY ||
                     info->type() == grpc::experimental::ServerRpcInfo::Type::SERVER_STREAMING) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (one_request_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
          status.error_message().empty()) {
        const std::string type = RequestType(method_);
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat(method_, ": the request is not a valid ",
                         type.empty() ? std::string("message") : type,
                         " (its bytes do not parse); is the client's ddp.v1 protocol the "
                         "coordinator's?")));
      }
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  // Unary and server-streaming methods: gRPC parses their one request before
  // any service code runs (Watch, WatchJob).
  const bool one_request_;
};

class Factory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MalformedRequestInterceptor(info);
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewMalformedRequestInterceptorFactory() {
  return std::make_unique<Factory>();
}

}  // namespace ddp::rpc
