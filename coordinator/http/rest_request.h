#ifndef DDP_COORDINATOR_HTTP_REST_REQUEST_H_
#define DDP_COORDINATOR_HTTP_REST_REQUEST_H_

// Decoding a REST request into its gRPC request message, without HTTP: the
// gateway calls it for every request, the fuzz target (tests/fuzz) calls the
// same code with arbitrary input.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/http/rest_routes.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace ddp::http {

struct RestRequestParts {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path?query as sent (still percent-encoded)
  std::string body;
  std::optional<std::string> last_event_id;  // the Last-Event-ID header
};

// The path of `target` without its query string, still percent-encoded (so an
// encoded '/' or ':' in a key is not taken for a separator).
std::string TargetPath(absl::string_view target);

// The generated descriptor of a gRPC path ("/ddp.v1.JobService/GetJob"); null
// when there is no such method.
const google::protobuf::MethodDescriptor* FindGrpcMethod(absl::string_view grpc_path);

// The request message of `route` (a copy of `prototype`) from the JSON body,
// the path variables `vars`, the query parameters and Last-Event-ID.
// INVALID_ARGUMENT naming what is wrong: a body where none is taken, JSON that
// is not the message, an unknown parameter or a bad value.
absl::StatusOr<std::unique_ptr<google::protobuf::Message>> BuildRestRequest(
    const RestRoute& route, const google::protobuf::Message& prototype,
    const std::vector<std::pair<std::string, std::string>>& vars, const RestRequestParts& parts);

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_REST_REQUEST_H_
