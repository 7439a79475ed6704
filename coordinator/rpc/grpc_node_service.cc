#include "coordinator/rpc/grpc_node_service.h"

#include <utility>

#include "common/grpc_status.h"
#include "coordinator/rpc/call_auth.h"

namespace ddp::rpc {
namespace {

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* GrpcNodeService::ListNodes(grpc::CallbackServerContext* context,
                                                     const v1::ListNodesRequest*,
                                                     v1::ListNodesResponse* response) {
  if (absl::Status ok = AuthorizeCall(authorizer_, *context, "/ddp.v1.NodeService/ListNodes", "");
      !ok.ok()) {
    return Answer(context, ok);
  }
  for (v1::Node& node : fleet_.ledger().List()) *response->add_nodes() = std::move(node);
  return Answer(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* GrpcNodeService::GetNode(grpc::CallbackServerContext* context,
                                                   const v1::GetNodeRequest* request,
                                                   v1::Node* response) {
  if (absl::Status ok = AuthorizeCall(authorizer_, *context, "/ddp.v1.NodeService/GetNode", "");
      !ok.ok()) {
    return Answer(context, ok);
  }
  absl::StatusOr<v1::Node> node = fleet_.ledger().Get(request->node_id());
  if (node.ok()) *response = *std::move(node);
  return Answer(context, node.status());
}

grpc::ServerUnaryReactor* GrpcNodeService::CordonNode(grpc::CallbackServerContext* context,
                                                      const v1::CordonNodeRequest* request,
                                                      v1::Node* response) {
  if (absl::Status ok = AuthorizeCall(authorizer_, *context, "/ddp.v1.NodeService/CordonNode", "");
      !ok.ok()) {
    return Answer(context, ok);
  }
  absl::StatusOr<v1::Node> node = fleet_.ledger().Cordon(request->node_id(), request->reason());
  if (!node.ok()) return Answer(context, node.status());
  *response = *std::move(node);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  fleet_.WhenDurable([reactor] { reactor->Finish(grpc::Status::OK); });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcNodeService::UncordonNode(grpc::CallbackServerContext* context,
                                                        const v1::UncordonNodeRequest* request,
                                                        v1::Node* response) {
  if (absl::Status ok =
          AuthorizeCall(authorizer_, *context, "/ddp.v1.NodeService/UncordonNode", "");
      !ok.ok()) {
    return Answer(context, ok);
  }
  absl::StatusOr<v1::Node> node = fleet_.ledger().Uncordon(request->node_id());
  if (!node.ok()) return Answer(context, node.status());
  *response = *std::move(node);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  fleet_.WhenDurable([reactor] { reactor->Finish(grpc::Status::OK); });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcNodeService::GetQuarantinePolicy(
    grpc::CallbackServerContext* context, const v1::GetQuarantinePolicyRequest*,
    v1::QuarantinePolicy* response) {
  if (absl::Status ok =
          AuthorizeCall(authorizer_, *context, "/ddp.v1.NodeService/GetQuarantinePolicy", "");
      !ok.ok()) {
    return Answer(context, ok);
  }
  *response = fleet_.ledger().Policy();
  return Answer(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* GrpcNodeService::SetQuarantinePolicy(
    grpc::CallbackServerContext* context, const v1::SetQuarantinePolicyRequest* request,
    v1::QuarantinePolicy* response) {
  if (absl::Status ok =
          AuthorizeCall(authorizer_, *context, "/ddp.v1.NodeService/SetQuarantinePolicy", "");
      !ok.ok()) {
    return Answer(context, ok);
  }
  absl::StatusOr<fleet::QuarantinePolicy> policy =
      fleet::QuarantinePolicyFromProto(request->after(), request->window_ms());
  if (!policy.ok()) return Answer(context, policy.status());
  absl::StatusOr<v1::QuarantinePolicy> set = fleet_.ledger().SetPolicy(*policy);
  if (!set.ok()) return Answer(context, set.status());
  *response = *std::move(set);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  fleet_.WhenDurable([reactor] { reactor->Finish(grpc::Status::OK); });
  return reactor;
}

}  // namespace ddp::rpc
