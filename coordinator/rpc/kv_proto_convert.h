#ifndef DDP_COORDINATOR_RPC_KV_PROTO_CONVERT_H_
#define DDP_COORDINATOR_RPC_KV_PROTO_CONVERT_H_

// Conversions between ddp.v1 protos and the KvStore's plain types.
//
// Thread-safety: stateless functions.

#include "coordinator/kv/kv_ops.h"
#include "coordinator/kv/kv_types.h"
#include "ddp/v1/kv.pb.h"

namespace ddp::rpc {

void ToProto(const kv::KeyValue& kv, v1::KeyValue* out);
void ToProto(const kv::Event& event, v1::Event* out);
kv::KeyValue FromProto(const v1::KeyValue& kv);
kv::PutRequest FromProto(const v1::PutRequest& request);

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_KV_PROTO_CONVERT_H_
