#ifndef DDP_TOOLS_DDPCTL_JSON_OUTPUT_H_
#define DDP_TOOLS_DDPCTL_JSON_OUTPUT_H_

// ddpctl's --json form of a reply message, on one line. It follows
// protobuf's JSON mapping (lowerCamelCase names, every scalar field printed,
// zeros included, enums by name, well-known types such as Timestamp in their
// JSON form) with two differences that make it usable from jq and scripts,
// as etcdctl's -w json is:
//   - 64-bit integers are JSON numbers, not strings (etcdctl prints its
//     revisions, lease ids and TTLs as numbers);
//   - a bytes field (keys, values) is printed as text when it is valid UTF-8.
//     Only a field holding other bytes is base64, and then a sibling field
//     "<name>Encoding": "base64" says so (e.g. "value": "AP8=",
//     "valueEncoding": "base64"); a repeated bytes field is all base64 when
//     one element is binary.
// Integers beyond 2^53 lose precision in readers that parse numbers as
// doubles (JavaScript); lease ids and revisions stay far below that.
// The REST API keeps protobuf's mapping (common/proto_json.h).
// Thread-safety: a stateless function.

#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace ddp::ddpctl {

std::string CliJson(const google::protobuf::Message& message);

// `text` as a quoted JSON string (the bytes must be valid UTF-8).
std::string JsonQuote(absl::string_view text);

}  // namespace ddp::ddpctl

#endif  // DDP_TOOLS_DDPCTL_JSON_OUTPUT_H_
