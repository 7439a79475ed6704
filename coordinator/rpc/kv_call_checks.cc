#include "coordinator/rpc/kv_call_checks.h"

#include "coordinator/kv/kv_validation.h"
#include "coordinator/rpc/call_auth.h"
#include "coordinator/rpc/kv_proto_convert.h"

namespace ddp::rpc {

absl::Status PrecheckKey(const std::string& ns, const std::string& key,
                         const kv::KvLimits& limits) {
  if (absl::Status s = kv::ValidateNamespace(ns, limits); !s.ok()) return s;
  return kv::ValidateKey(key, limits);
}

kv::LeaseCaller LeaseCallerOf(const auth::Identity& identity) {
  if (identity.kind == auth::Identity::Kind::kJob) {
    return kv::LeaseCaller::OfNamespace(identity.job_id);
  }
  return kv::LeaseCaller::Anyone();
}

absl::StatusOr<kv::PutRequest> CheckedPut(const auth::Authorizer* authorizer,
                                          const auth::Identity& identity,
                                          const v1::PutRequest& request,
                                          const kv::KvLimits& limits) {
  if (absl::Status allowed =
          AuthorizeCall(authorizer, identity, "/ddp.v1.KeyValueService/Put", request.namespace_());
      !allowed.ok()) {
    return allowed;
  }
  if (absl::Status valid = PrecheckKey(request.namespace_(), request.key(), limits); !valid.ok()) {
    return valid;
  }
  if (absl::Status valid = kv::ValidateValue(request.value(), limits); !valid.ok()) return valid;
  kv::PutRequest put = FromProto(request);
  if (put.lease != 0) put.lease_caller = LeaseCallerOf(identity);
  return put;
}

void PutResultToProto(const kv::PutResult& result, v1::PutResponse* response) {
  response->set_revision(result.revision);
  if (result.previous) {
    response->set_had_previous(true);
    ToProto(*result.previous, response->mutable_previous());
  }
}

}  // namespace ddp::rpc
