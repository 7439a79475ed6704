#ifndef DDP_COMMON_PROTO_JSON_H_
#define DDP_COMMON_PROTO_JSON_H_

// The product's one JSON form of a protobuf message (protobuf's JSON mapping):
// lowerCamelCase field names, every field printed (zeros and empty lists
// too), int64 as strings, bytes as base64, enums by name, on one line. REST
// replies and `ddpctl --json` both print messages this way.

#include <string>

#include "google/protobuf/message.h"

namespace ddp {

std::string ProtoJson(const google::protobuf::Message& message);

}  // namespace ddp

#endif  // DDP_COMMON_PROTO_JSON_H_
