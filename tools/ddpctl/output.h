#ifndef DDP_TOOLS_DDPCTL_OUTPUT_H_
#define DDP_TOOLS_DDPCTL_OUTPUT_H_

// How ddpctl prints results: readable text by default, one JSON object a line
// with --json. Keys and values are bytes: printed as text when they are valid
// UTF-8; otherwise C-escaped in text output and base64 in JSON (the field is
// then named "<name>_base64"). Plain C++ over the generated proto messages (no
// gRPC). Thread-safety: stateless functions; JsonObject is a plain value.

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ddp/v1/kv.pb.h"

namespace ddp::ddpctl {

bool IsValidUtf8(absl::string_view bytes);
// Text form of a key or value: as is when valid UTF-8 without control
// characters, else C-escaped and quoted.
std::string PrintableBytes(absl::string_view bytes);
// A JSON string literal, quotes included.
std::string JsonQuote(absl::string_view text);

// Builds one JSON object by hand, fields in insertion order.
class JsonObject {
 public:
  JsonObject& Int(absl::string_view name, int64_t value);
  JsonObject& Bool(absl::string_view name, bool value);
  JsonObject& String(absl::string_view name, absl::string_view value);
  // UTF-8 text as "name", anything else base64 as "name_base64".
  JsonObject& Bytes(absl::string_view name, absl::string_view value);
  // `json` must already be valid JSON (an object or array).
  JsonObject& Raw(absl::string_view name, absl::string_view json);
  std::string Build() const { return absl::StrCat("{", body_, "}"); }

 private:
  void Name(absl::string_view name);
  std::string body_;
};

std::string KeyValueJson(const v1::KeyValue& kv, bool with_value = true);
// "KEY = VALUE" or just "KEY" (keys only).
std::string KeyValueText(const v1::KeyValue& kv, bool with_value = true);
// One watch event: "PUT KEY = VALUE (revision R)" / "DELETE KEY (revision R)".
std::string EventText(const v1::Event& event);
std::string EventJson(const v1::Event& event);

}  // namespace ddp::ddpctl

#endif  // DDP_TOOLS_DDPCTL_OUTPUT_H_
