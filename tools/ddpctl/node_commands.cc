// `nodes list|get|cordon|uncordon|policy`: the fleet's ledger and its
// quarantine policy (ddp.v1.NodeService).

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tools/ddpctl/grpc_command_context.h"
#include "tools/ddpctl/output.h"

namespace ddp::ddpctl {
namespace {

grpc::Status NodesList(CommandContext& c) {
  v1::ListNodesResponse response;
  grpc::Status status =
      c.Call(c.nodes, &v1::NodeService::Stub::ListNodes, v1::ListNodesRequest(), &response);
  if (!status.ok()) return status;
  if (c.json()) {
    for (const v1::Node& node : response.nodes()) c.out << CliJson(node) << "\n";
  } else {
    c.out << NodeListText({response.nodes().begin(), response.nodes().end()});
  }
  return grpc::Status::OK;
}

grpc::Status NodesGet(CommandContext& c) {
  v1::GetNodeRequest request;
  request.set_node_id(c.arg(0));
  return c.CallAndPrint(c.nodes, &v1::NodeService::Stub::GetNode, request,
                        [](std::ostream& out, const v1::Node& node) { out << NodeText(node); });
}

grpc::Status NodesCordon(CommandContext& c) {
  v1::CordonNodeRequest request;
  request.set_node_id(c.arg(0));
  request.set_reason(c.invocation.FlagString("reason"));
  return c.CallAndPrint(c.nodes, &v1::NodeService::Stub::CordonNode, request,
                        [](std::ostream& out, const v1::Node& node) {
                          out << "node " << PrintableBytes(node.node_id()) << " "
                              << NodeStateText(node.state()) << ": " << node.state_reason() << "\n";
                        });
}

grpc::Status NodesUncordon(CommandContext& c) {
  v1::UncordonNodeRequest request;
  request.set_node_id(c.arg(0));
  return c.CallAndPrint(c.nodes, &v1::NodeService::Stub::UncordonNode, request,
                        [](std::ostream& out, const v1::Node& node) {
                          out << "node " << PrintableBytes(node.node_id()) << " "
                              << NodeStateText(node.state()) << "\n";
                        });
}

void PrintPolicy(std::ostream& out, const v1::QuarantinePolicy& policy) {
  if (policy.after() == 0) {
    out << "quarantine: never (after 0)";
  } else {
    out << "quarantine after " << policy.after() << " counted incident"
        << (policy.after() == 1 ? "" : "s") << " within "
        << absl::FormatDuration(absl::Milliseconds(policy.window_ms()));
  }
  if (policy.set_unix_ms() == 0) {
    out << " (the coordinator's --quarantine-after/--quarantine-window)\n";
  } else {
    out << " (set through the API at "
        << absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(policy.set_unix_ms()),
                            absl::UTCTimeZone())
        << ")\n";
  }
}

// `nodes policy [get]` and `nodes policy set --after N [--window W]`. The
// limits are the coordinator's to check (its error names the value and the
// limit); here only the usage.
grpc::Status NodesPolicy(CommandContext& c) {
  const std::string action = c.invocation.args.empty() ? "get" : c.arg(0);
  const bool setting = action == "set";
  if (!setting && action != "get") {
    return UsageError(absl::InvalidArgumentError(
        absl::StrCat("nodes policy: unknown action '", action, "'; use get or set")));
  }
  if (!setting) {
    if (c.invocation.HasFlag("after") || c.invocation.HasFlag("window")) {
      return UsageError(absl::InvalidArgumentError(
          "nodes policy get takes no --after/--window; use: nodes policy set --after N"));
    }
    return c.CallAndPrint(c.nodes, &v1::NodeService::Stub::GetQuarantinePolicy,
                          v1::GetQuarantinePolicyRequest(), PrintPolicy);
  }
  if (!c.invocation.HasFlag("after")) {
    return UsageError(absl::InvalidArgumentError(
        "nodes policy set needs --after N (0: never quarantine) [--window W, default 1h]"));
  }
  v1::SetQuarantinePolicyRequest request;
  const int64_t after = c.invocation.FlagInt64("after", 0);
  if (after < 0 || after > std::numeric_limits<int32_t>::max()) {
    return UsageError(absl::InvalidArgumentError(
        absl::StrCat("--after=", after, " must be 0 (never) or a count >= 1")));
  }
  request.set_after(static_cast<int32_t>(after));
  request.set_window_ms(
      absl::ToInt64Milliseconds(c.invocation.FlagDuration("window", absl::Hours(1))));
  return c.CallAndPrint(c.nodes, &v1::NodeService::Stub::SetQuarantinePolicy, request, PrintPolicy);
}

}  // namespace

std::map<std::string, Handler> NodeCommandHandlers() {
  return {{"nodes list", NodesList},
          {"nodes get", NodesGet},
          {"nodes cordon", NodesCordon},
          {"nodes uncordon", NodesUncordon},
          {"nodes policy", NodesPolicy}};
}

}  // namespace ddp::ddpctl
