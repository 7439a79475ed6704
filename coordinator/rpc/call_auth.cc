#include "coordinator/rpc/call_auth.h"

#include <string>

namespace ddp::rpc {

auth::Identity CallIdentity(const auth::Authorizer* authorizer,
                            const grpc::ServerContextBase& context) {
  if (authorizer == nullptr || !authorizer->enabled()) return auth::Identity{};
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return auth::Identity{};
  return authorizer->Resolve(absl::string_view(it->second.data(), it->second.size()));
}

absl::Status AuthorizeCall(const auth::Authorizer* authorizer,
                           const grpc::ServerContextBase& context, absl::string_view method,
                           absl::string_view target) {
  if (authorizer == nullptr || !authorizer->enabled()) return absl::OkStatus();
  return authorizer->Authorize(CallIdentity(authorizer, context), method, target);
}

absl::Status AuthorizeCall(const auth::Authorizer* authorizer, const auth::Identity& identity,
                           absl::string_view method, absl::string_view target) {
  if (authorizer == nullptr || !authorizer->enabled()) return absl::OkStatus();
  return authorizer->Authorize(identity, method, target);
}

}  // namespace ddp::rpc
