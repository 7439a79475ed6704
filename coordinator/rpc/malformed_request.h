#ifndef DDP_COORDINATOR_RPC_MALFORMED_REQUEST_H_
#define DDP_COORDINATOR_RPC_MALFORMED_REQUEST_H_

// gRPC 1.51's callback handlers answer a unary or server-streaming request
// (WatchJob) whose bytes do not parse with UNIMPLEMENTED and no
// message, before any service code runs. This server interceptor turns that
// answer into INVALID_ARGUMENT naming the method and the message type
// expected. Our methods never answer UNIMPLEMENTED with an empty
// message themselves, so nothing else is rewritten. (The Session and KV Watch
// streams parse their own bytes, and answer MalformedRequest's status.)

#include <memory>

#include "absl/strings/string_view.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"

namespace ddp::rpc {

// INVALID_ARGUMENT: `method`'s request is not a valid `type`.
grpc::Status MalformedRequest(absl::string_view method, absl::string_view type);

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewMalformedRequestInterceptorFactory();

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_MALFORMED_REQUEST_H_
