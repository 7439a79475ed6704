#include "coordinator/rpc/kv_proto_convert.h"

namespace ddp::rpc {

void ToProto(const kv::KeyValue& kv, v1::KeyValue* out) {
  out->set_namespace_(kv.ns);
  out->set_key(kv.key);
  out->set_value(kv.value);
  out->set_create_revision(kv.create_revision);
  out->set_mod_revision(kv.mod_revision);
  out->set_version(kv.version);
  out->set_lease(kv.lease);
}

void ToProto(const kv::Event& event, v1::Event* out) {
  out->set_type(event.type == kv::EventType::kPut ? v1::Event::PUT : v1::Event::DELETE);
  ToProto(event.kv, out->mutable_kv());
}

kv::KeyValue FromProto(const v1::KeyValue& kv) {
  kv::KeyValue out;
  out.ns = kv.namespace_();
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

kv::PutRequest FromProto(const v1::PutRequest& request) {
  kv::PutRequest out;
  out.ns = request.namespace_();
  out.key = request.key();
  out.value = request.value();
  out.lease = request.lease();
  out.return_previous = request.return_previous();
  switch (request.condition_case()) {
    case v1::PutRequest::kExpectedModRevision:
      out.condition = kv::PutRequest::Condition::kExpectedModRevision;
      out.expected_mod_revision = request.expected_mod_revision();
      break;
    case v1::PutRequest::kIfAbsent:
      out.condition = request.if_absent() ? kv::PutRequest::Condition::kAbsent
                                          : kv::PutRequest::Condition::kNone;
      break;
    case v1::PutRequest::CONDITION_NOT_SET:
      break;
  }
  return out;
}

}  // namespace ddp::rpc
