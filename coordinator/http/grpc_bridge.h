#ifndef DDP_COORDINATOR_HTTP_GRPC_BRIDGE_H_
#define DDP_COORDINATOR_HTTP_GRPC_BRIDGE_H_

// Calls the coordinator's own gRPC methods by name with protobuf messages, over
// an in-process channel: the REST gateway translates HTTP into these calls (as
// grpc-gateway does), so every REST route runs exactly the gRPC method's code:
// the same validation, durability and errors.
//
// Thread-safety: any number of calls at once from any threads.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"
#include "grpcpp/generic/generic_stub.h"

namespace ddp::http {

// Request metadata forwarded to the gRPC method (e.g. credentials).
using Metadata = std::vector<std::pair<std::string, std::string>>;

class GrpcBridge {
 public:
  explicit GrpcBridge(std::shared_ptr<grpc::Channel> channel);

  // `method` is the gRPC path, e.g. "/ddp.v1.JobService/GetJob". Fills
  // *response; returns the method's status.
  absl::Status Unary(const std::string& method, const google::protobuf::Message& request,
                     google::protobuf::Message* response, const Metadata& metadata);

  // A server-streaming method: `on_message` gets each reply (parsed into a
  // fresh copy of `response_prototype`) and returns false to end the call.
  // `still_wanted` is asked every `poll` while no reply arrives (e.g. "is the
  // HTTP client still there?"); false cancels the call. Returns the method's
  // final status (CANCELLED when ended from this side).
  absl::Status ServerStream(const std::string& method, const google::protobuf::Message& request,
                            const google::protobuf::Message& response_prototype,
                            const Metadata& metadata,
                            const std::function<bool(const google::protobuf::Message&)>& on_message,
                            const std::function<bool()>& still_wanted);

 private:
  std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub stub_;
};

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_GRPC_BRIDGE_H_
