#ifndef DDP_COORDINATOR_RPC_GRPC_NODE_SERVICE_H_
#define DDP_COORDINATOR_RPC_GRPC_NODE_SERVICE_H_

// ddp.v1.NodeService (proto/ddp/v1/nodes.proto) over the gRPC callback API:
// a thin adapter onto the fleet's NodeLedger. Reads answer from memory;
// CordonNode, UncordonNode and SetQuarantinePolicy answer once the change is
// durable (the participant's WhenDurable).
//
// Thread-safety: thread-safe. The participant must outlive the service, and
// the service the grpc::Server it is registered with.

#include "coordinator/auth/authorizer.h"
#include "coordinator/commit/node_ledger_participant.h"
#include "ddp/v1/nodes.grpc.pb.h"

namespace ddp::rpc {

class GrpcNodeService final : public v1::NodeService::CallbackService {
 public:
  // `authorizer` may be null (no checks).
  GrpcNodeService(commit::NodeLedgerParticipant& fleet, const auth::Authorizer* authorizer)
      : fleet_(fleet), authorizer_(authorizer) {}

  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const v1::ListNodesRequest* request,
                                      v1::ListNodesResponse* response) override;
  grpc::ServerUnaryReactor* GetNode(grpc::CallbackServerContext* context,
                                    const v1::GetNodeRequest* request, v1::Node* response) override;
  grpc::ServerUnaryReactor* CordonNode(grpc::CallbackServerContext* context,
                                       const v1::CordonNodeRequest* request,
                                       v1::Node* response) override;
  grpc::ServerUnaryReactor* UncordonNode(grpc::CallbackServerContext* context,
                                         const v1::UncordonNodeRequest* request,
                                         v1::Node* response) override;
  grpc::ServerUnaryReactor* GetQuarantinePolicy(grpc::CallbackServerContext* context,
                                                const v1::GetQuarantinePolicyRequest* request,
                                                v1::QuarantinePolicy* response) override;
  grpc::ServerUnaryReactor* SetQuarantinePolicy(grpc::CallbackServerContext* context,
                                                const v1::SetQuarantinePolicyRequest* request,
                                                v1::QuarantinePolicy* response) override;

 private:
  commit::NodeLedgerParticipant& fleet_;
  const auth::Authorizer* const authorizer_;
};

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_GRPC_NODE_SERVICE_H_
