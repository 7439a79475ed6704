#ifndef DDP_TOOLS_DDPCTL_OUTPUT_H_
#define DDP_TOOLS_DDPCTL_OUTPUT_H_

// How ddpctl prints results: readable text by default, one JSON object a line
// with --json. Keys and values are bytes: printed as text when they are valid
// UTF-8; otherwise C-escaped in text output and base64 in JSON (the field is
// then named "<name>_base64"). Plain C++ over the generated proto messages (no
// gRPC). Thread-safety: stateless functions; JsonObject is a plain value.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ddp/v1/jobs.pb.h"
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

// ---- Jobs (job_output.cc) ----
// Times print as UTC RFC 3339 with milliseconds; durations as 500ms, 3s, 10m.

// The name jobs.proto gives a state ("RUNNING").
std::string JobStateName(v1::JobState state);
// Case-insensitive state name; INVALID_ARGUMENT naming the word and the
// choices for anything else (JOB_STATE_UNSPECIFIED included).
absl::StatusOr<v1::JobState> ParseJobState(absl::string_view name);
// `jobs list`: a header line, then one aligned row per job (JOB, STATE,
// GENERATION, RESTARTS as count/max, MEMBERS, SPARES).
std::string JobListText(const std::vector<v1::Job>& jobs);
// One line: "JOB: STATE, generation G, restarts R/M, 2 members, 0 spares".
std::string JobSummaryText(const v1::Job& job);
// `jobs get`: settings, state, members, spares, excluded nodes, failures
// (newest last) and root cause, one item a line.
std::string JobText(const v1::Job& job);
// The whole job as one JSON object (state and event types as names).
std::string JobJson(const v1::Job& job);
// One failure on one line: when, where (generation, node, ranks), how (exit
// code, signal or hang) and the message.
std::string FailureText(const v1::Failure& failure);
// One event: "#INDEX TIME TYPE [node N] [generation G]: message [failure]".
std::string JobEventText(const v1::JobEvent& event);
std::string JobEventJson(const v1::JobEvent& event);

}  // namespace ddp::ddpctl

#endif  // DDP_TOOLS_DDPCTL_OUTPUT_H_
