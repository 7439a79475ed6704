#ifndef DDP_COORDINATOR_RPC_KV_CALL_CHECKS_H_
#define DDP_COORDINATOR_RPC_KV_CALL_CHECKS_H_

// What the KV service checks before a request's bytes are copied into the
// core's types, shared by its unary calls and its streams.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/auth/authorizer.h"
#include "coordinator/kv/kv_ops.h"
#include "coordinator/kv/kv_types.h"
#include "ddp/v1/kv.pb.h"

namespace ddp::rpc {

// The namespace's and the key's sizes.
absl::Status PrecheckKey(const std::string& ns, const std::string& key, const kv::KvLimits& limits);

// The leases a call may act on (kv/lease_ownership.h): a job's token, its
// job's; the admin token, or no authorization, every lease.
kv::LeaseCaller LeaseCallerOf(const auth::Identity& identity);

// A Put as the core takes it: authorized for `identity` as
// /ddp.v1.KeyValueService/Put on its namespace (null `authorizer`: no
// checks), sizes checked. Possible errors: those of Authorizer::Authorize,
// INVALID_ARGUMENT (a size over its limit, named).
absl::StatusOr<kv::PutRequest> CheckedPut(const auth::Authorizer* authorizer,
                                          const auth::Identity& identity,
                                          const v1::PutRequest& request,
                                          const kv::KvLimits& limits);
void PutResultToProto(const kv::PutResult& result, v1::PutResponse* response);

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_KV_CALL_CHECKS_H_
