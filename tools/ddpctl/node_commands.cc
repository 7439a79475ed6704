// `nodes list|get|cordon|uncordon`: the fleet's ledger (ddp.v1.NodeService).

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

}  // namespace

std::map<std::string, Handler> NodeCommandHandlers() {
  return {{"nodes list", NodesList},
          {"nodes get", NodesGet},
          {"nodes cordon", NodesCordon},
          {"nodes uncordon", NodesUncordon}};
}

}  // namespace ddp::ddpctl
