#ifndef DDP_COORDINATOR_RPC_MALFORMED_REQUEST_H_
#define DDP_COORDINATOR_RPC_MALFORMED_REQUEST_H_

// gRPC 1.51's callback handlers answer a unary or server-streaming request
// (Watch, WatchJob) whose bytes do not parse with UNIMPLEMENTED and no
// message, before any service code runs. This server interceptor turns that
// answer into INVALID_ARGUMENT naming the method and the message type
// expected. Our methods never answer UNIMPLEMENTED with an empty
// message themselves, so nothing else is rewritten. (The Session stream parses
// its own bytes: see session/grpc_session_reactor.h.)

#include <memory>

#include "grpcpp/support/server_interceptor.h"

namespace ddp::rpc {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewMalformedRequestInterceptorFactory();

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_MALFORMED_REQUEST_H_
