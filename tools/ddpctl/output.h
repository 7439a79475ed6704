#ifndef DDP_TOOLS_DDPCTL_OUTPUT_H_
#define DDP_TOOLS_DDPCTL_OUTPUT_H_

// How ddpctl prints results as text. With --json, ddpctl prints each reply
// message with common/proto_json.h instead (protobuf's JSON mapping, the same
// form as the REST API's replies). Keys and values are bytes: printed as text
// when they are valid UTF-8, else C-escaped. Plain C++ over the generated proto
// messages (no gRPC). Thread-safety: stateless functions.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ddp/v1/jobs.pb.h"
#include "ddp/v1/kv.pb.h"
#include "ddp/v1/nodes.pb.h"

namespace ddp::ddpctl {

bool IsValidUtf8(absl::string_view bytes);
// Text form of a key or value: as is when valid UTF-8 without control
// characters, else C-escaped and quoted.
std::string PrintableBytes(absl::string_view bytes);
// Worker output (a stderr tail, a traceback): PrintableBytes line by line,
// each line after the first prefixed with `indent`; trailing newlines dropped.
std::string PrintableLines(absl::string_view text, absl::string_view indent);
// "KEY = VALUE" or just "KEY" (keys only).
std::string KeyValueText(const v1::KeyValue& kv, bool with_value = true);
// One watch event: "PUT KEY = VALUE (revision R)" / "DELETE KEY (revision R)".
std::string EventText(const v1::Event& event);

// ---- Jobs (job_output.cc) ----
// Times print as UTC RFC 3339 with milliseconds; durations as 500ms, 3s, 10m.

// The name jobs.proto gives a state ("RUNNING").
std::string JobStateName(v1::JobState state);
// Case-insensitive state name; INVALID_ARGUMENT naming the word and the
// choices for anything else (JOB_STATE_UNSPECIFIED included).
absl::StatusOr<v1::JobState> ParseJobState(absl::string_view name);
// `jobs list`: a header line, then one aligned row per job (JOB, STATE,
// GENERATION, RESTARTS as count/max, MEMBERS, SPARES).
// `show_runs`: a RUN column (jobs list --all-runs).
std::string JobListText(const std::vector<v1::Job>& jobs, bool show_runs = false);
// One line: "JOB: STATE, generation G, restarts R/M, 2 members, 0 spares".
std::string JobSummaryText(const v1::Job& job);
// `jobs get`: settings, state, members, spares, excluded nodes, failures
// (newest last) and root cause, one item a line.
std::string JobText(const v1::Job& job);
// One failure on one line: when, where (generation, node, ranks), how (exit
// code, signal or hang) and the message.
std::string FailureText(const v1::Failure& failure);
// One event: "#INDEX TIME TYPE [node N] [generation G]: message [failure]".
std::string JobEventText(const v1::JobEvent& event);
// `jobs stacks`: "job J, generation G: N ranks in K groups", the nodes that
// did not answer, then each group ("rank 2 (node b):" / "ranks 0,1,3:")
// with its stack indented, the odd one out first.
std::string JobStacksText(const v1::JobStacks& stacks);

// The fleet (node_output.cc). "READY", "CORDONED", "QUARANTINED".
std::string NodeStateText(v1::NodeState state);
// `nodes list`: one row a node (state, incidents, last job and time, the
// names of its failing health checks).
std::string NodeListText(const std::vector<v1::Node>& nodes);
// `nodes get`: state and why, address, last job, every health check with its
// output, the incidents newest last ("(not counted)": a knock-on).
std::string NodeText(const v1::Node& node);

}  // namespace ddp::ddpctl

#endif  // DDP_TOOLS_DDPCTL_OUTPUT_H_
