#ifndef DDP_COORDINATOR_HTTP_HTTP_ERRORS_H_
#define DDP_COORDINATOR_HTTP_HTTP_ERRORS_H_

// How an absl::Status (a gRPC code and message) travels over HTTP, by
// grpc-gateway's conventions: the HTTP status its HTTPStatusFromCode maps the
// code to, and a JSON body {"code": <gRPC code number>, "message": "...",
// "details": []}.

#include <string>

#include "absl/status/status.h"

namespace ddp::http {

int HttpStatusFromCode(absl::StatusCode code);

// The JSON error body (built through protobuf's JSON mapping).
std::string ErrorJson(const absl::Status& status);

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_HTTP_ERRORS_H_
