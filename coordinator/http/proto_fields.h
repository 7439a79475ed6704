#ifndef DDP_COORDINATOR_HTTP_PROTO_FIELDS_H_
#define DDP_COORDINATOR_HTTP_PROTO_FIELDS_H_

// Sets a request message's field from a URL path variable or query parameter,
// as grpc-gateway does: `field_path` is a dotted path of field names (proto or
// JSON spelling, e.g. "settings.min_nodes" or "settings.minNodes"); a repeated
// field gets one element per call. Values are text: numbers in decimal, bools
// "true"/"false", enums by name or number. Unlike grpc-gateway, a bytes field
// takes the raw (percent-decoded) text, not base64, so a key reads as itself
// in a URL; JSON bodies keep protobuf's base64 for bytes.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace ddp::http {

// INVALID_ARGUMENT naming the parameter and the message type when the field
// does not exist, is a message, or the value does not parse as its type.
absl::Status SetFieldFromText(google::protobuf::Message& message, absl::string_view field_path,
                              absl::string_view value);

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_PROTO_FIELDS_H_
