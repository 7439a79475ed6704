#ifndef DDP_COORDINATOR_RPC_CALL_AUTH_H_
#define DDP_COORDINATOR_RPC_CALL_AUTH_H_

// The gRPC side of authorization (coordinator/auth): a call's identity from
// its "authorization" metadata, checked against the method's rule.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/grpc_status.h"
#include "coordinator/auth/authorizer.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"

namespace ddp::rpc {

// The identity of the call (kNone without an authorizer or credentials).
auth::Identity CallIdentity(const auth::Authorizer* authorizer,
                            const grpc::ServerContextBase& context);

// OK when `authorizer` is null or off, or the call may run `method` on
// `target` (the job id or KV namespace it names; empty when none). Possible
// errors: those of Authorizer::Authorize.
absl::Status AuthorizeCall(const auth::Authorizer* authorizer,
                           const grpc::ServerContextBase& context, absl::string_view method,
                           absl::string_view target);
// The same for an identity CallIdentity gave already: a call that needs its
// identity again (leases, streams) hashes the token once.
absl::Status AuthorizeCall(const auth::Authorizer* authorizer, const auth::Identity& identity,
                           absl::string_view method, absl::string_view target);

// A stream (Reactor: grpc::ServerWriteReactor<R> or ServerBidiReactor<Q, R>)
// that ends at once with `status` (a refused call).
template <typename Reactor>
class RefusedReactor final : public Reactor {
 public:
  explicit RefusedReactor(const absl::Status& status) { this->Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};
template <typename Response>
using RefusedStream = RefusedReactor<grpc::ServerWriteReactor<Response>>;

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_CALL_AUTH_H_
