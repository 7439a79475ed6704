#include "coordinator/rpc/grpc_kv_service.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "coordinator/kv/kv_validation.h"
#include "coordinator/rpc/call_auth.h"
#include "coordinator/rpc/grpc_put_stream_reactor.h"
#include "coordinator/rpc/grpc_snapshot_reactor.h"
#include "coordinator/rpc/kv_call_checks.h"
#include "coordinator/rpc/kv_proto_convert.h"

namespace ddp::rpc {
namespace {

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

GrpcKvService::GrpcKvService(kv::KvStore& store, GrpcKvServiceOptions options)
    : store_(store),
      options_(std::move(options)),
      watch_calls_(this, store_, options_.watch_message_bytes, options_.authorizer) {}

void GrpcKvService::RegisterWith(grpc::ServerBuilder& builder, AsyncStreamQueues& queues) {
  builder.RegisterService(this);
  queues.AddMethod(&watch_calls_);
}

grpc::ServerUnaryReactor* GrpcKvService::Put(grpc::CallbackServerContext* context,
                                             const v1::PutRequest* request,
                                             v1::PutResponse* response) {
  absl::StatusOr<kv::PutRequest> put = CheckedPut(
      options_.authorizer, CallIdentity(options_.authorizer, *context), *request, store_.limits());
  if (!put.ok()) return FinishNow(context, put.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  store_.PutAsync(*std::move(put), [reactor, response](absl::StatusOr<kv::PutResult> r) {
    if (r.ok()) PutResultToProto(*r, response);
    reactor->Finish(ToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerBidiReactor<v1::PutStreamRequest, v1::PutStreamResponse>* GrpcKvService::PutStream(
    grpc::CallbackServerContext* context) {
  const auth::Identity identity = CallIdentity(options_.authorizer, *context);
  if (absl::Status allowed =
          AuthorizeCall(options_.authorizer, identity, "/ddp.v1.KeyValueService/PutStream", "");
      !allowed.ok()) {
    return new RefusedReactor<grpc::ServerBidiReactor<v1::PutStreamRequest, v1::PutStreamResponse>>(
        allowed);
  }
  return new PutStreamReactor(store_, options_.authorizer, identity,
                              options_.put_stream_max_in_flight);
}

grpc::ServerUnaryReactor* GrpcKvService::Get(grpc::CallbackServerContext* context,
                                             const v1::GetRequest* request,
                                             v1::GetResponse* response) {
  if (absl::Status allowed = AuthorizeCall(options_.authorizer, *context,
                                           "/ddp.v1.KeyValueService/Get", request->namespace_());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  absl::StatusOr<kv::GetResult> r =
      store_.Get({request->namespace_(), request->key(), request->revision()});
  if (r.ok()) {
    ToProto(r->kv, response->mutable_kv());
    response->set_revision(r->revision);
  }
  return FinishNow(context, r.status());
}

grpc::ServerUnaryReactor* GrpcKvService::Range(grpc::CallbackServerContext* context,
                                               const v1::RangeRequest* request,
                                               v1::RangeResponse* response) {
  if (absl::Status allowed = AuthorizeCall(options_.authorizer, *context,
                                           "/ddp.v1.KeyValueService/Range", request->namespace_());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  kv::RangeRequest range;
  range.ns = request->namespace_();
  range.prefix = request->prefix();
  range.limit = request->limit();
  range.start_after = request->start_after();
  range.keys_only = request->keys_only();
  absl::StatusOr<kv::RangeResult> r = store_.Range(range);
  if (r.ok()) {
    for (const kv::KeyValue& kv : r->kvs) ToProto(kv, response->add_kvs());
    response->set_more(r->more);
    response->set_next_start_after(r->next_start_after);
    response->set_revision(r->revision);
  }
  return FinishNow(context, r.status());
}

grpc::ServerUnaryReactor* GrpcKvService::Delete(grpc::CallbackServerContext* context,
                                                const v1::DeleteRequest* request,
                                                v1::DeleteResponse* response) {
  if (absl::Status allowed = AuthorizeCall(options_.authorizer, *context,
                                           "/ddp.v1.KeyValueService/Delete", request->namespace_());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  store_.DeleteAsync({request->namespace_(), request->key(), request->prefix()},
                     [reactor, response](absl::StatusOr<kv::DeleteResult> r) {
                       if (r.ok()) {
                         response->set_deleted(r->deleted);
                         response->set_revision(r->revision);
                       }
                       reactor->Finish(ToGrpcStatus(r.status()));
                     });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcKvService::CompareAndSet(grpc::CallbackServerContext* context,
                                                       const v1::CompareAndSetRequest* request,
                                                       v1::CompareAndSetResponse* response) {
  if (absl::Status allowed =
          AuthorizeCall(options_.authorizer, *context, "/ddp.v1.KeyValueService/CompareAndSet",
                        request->namespace_());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  absl::Status valid = PrecheckKey(request->namespace_(), request->key(), store_.limits());
  if (valid.ok()) valid = kv::ValidateValue(request->expected(), store_.limits());
  if (valid.ok()) valid = kv::ValidateValue(request->desired(), store_.limits());
  if (!valid.ok()) return FinishNow(context, valid);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  store_.CompareAndSetAsync(
      {request->namespace_(), request->key(), request->expected(), request->desired()},
      [reactor, response](absl::StatusOr<kv::CompareAndSetResult> r) {
        if (r.ok()) {
          response->set_value(r->value);
          response->set_swapped(r->swapped);
          response->set_revision(r->revision);
        }
        reactor->Finish(ToGrpcStatus(r.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcKvService::Add(grpc::CallbackServerContext* context,
                                             const v1::AddRequest* request,
                                             v1::AddResponse* response) {
  if (absl::Status allowed = AuthorizeCall(options_.authorizer, *context,
                                           "/ddp.v1.KeyValueService/Add", request->namespace_());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  store_.AddAsync({request->namespace_(), request->key(), request->delta()},
                  [reactor, response](absl::StatusOr<kv::AddResult> r) {
                    if (r.ok()) {
                      response->set_value(r->value);
                      response->set_revision(r->revision);
                    }
                    reactor->Finish(ToGrpcStatus(r.status()));
                  });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcKvService::Wait(grpc::CallbackServerContext* context,
                                              const v1::WaitRequest* request,
                                              v1::WaitResponse* response) {
  if (absl::Status allowed = AuthorizeCall(options_.authorizer, *context,
                                           "/ddp.v1.KeyValueService/Wait", request->namespace_());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  const kv::KvLimits& limits = store_.limits();
  absl::Status valid = kv::ValidateNamespace(request->namespace_(), limits);
  if (valid.ok()) valid = kv::ValidateWaitKeyCount(request->keys_size(), limits);
  for (int i = 0; valid.ok() && i < request->keys_size(); ++i) {
    valid = kv::ValidateKey(request->keys(i), limits);
  }
  absl::StatusOr<absl::Duration> timeout = kv::ResolveWaitTimeout(request->timeout_ms(), limits);
  if (valid.ok() && !timeout.ok()) valid = timeout.status();
  if (!valid.ok()) return FinishNow(context, valid);
  kv::WaitRequest wait;
  wait.ns = request->namespace_();
  wait.keys.assign(request->keys().begin(), request->keys().end());
  wait.timeout_ms = absl::ToInt64Milliseconds(*timeout);
  // No point waiting past the client's own deadline: it would leave a dead
  // entry behind.
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    const int64_t left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                deadline - std::chrono::system_clock::now())
                                .count();
    wait.timeout_ms = std::max<int64_t>(1, std::min(wait.timeout_ms, left_ms));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  store_.WaitAsync(std::move(wait), [reactor, response](absl::StatusOr<kv::WaitResult> r) {
    if (r.ok()) response->set_revision(r->revision);
    reactor->Finish(ToGrpcStatus(r.status()));
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::SnapshotChunk>* GrpcKvService::Snapshot(
    grpc::CallbackServerContext* context, const v1::SnapshotRequest* /*request*/) {
  if (absl::Status allowed =
          AuthorizeCall(options_.authorizer, *context, "/ddp.v1.KeyValueService/Snapshot", "");
      !allowed.ok()) {
    return new RefusedStream<v1::SnapshotChunk>(allowed);
  }
  if (!options_.snapshot) {
    return new RefusedStream<v1::SnapshotChunk>(absl::FailedPreconditionError(
        "this coordinator keeps its state in etcd: use `etcdctl snapshot save FILE` against "
        "the etcd cluster of --store"));
  }
  const int64_t revision = store_.Status().revision;
  absl::StatusOr<std::string> copy = options_.snapshot();
  if (!copy.ok()) return new RefusedStream<v1::SnapshotChunk>(copy.status());
  return new SnapshotReactor(*std::move(copy), revision, options_.snapshot_chunk_bytes);
}

grpc::ServerUnaryReactor* GrpcKvService::LeaseGrant(grpc::CallbackServerContext* context,
                                                    const v1::LeaseGrantRequest* request,
                                                    v1::LeaseGrantResponse* response) {
  const auth::Identity identity = CallIdentity(options_.authorizer, *context);
  if (absl::Status allowed =
          AuthorizeCall(options_.authorizer, identity, "/ddp.v1.KeyValueService/LeaseGrant", "");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  // The lease belongs to the namespace named, by default the caller's job.
  kv::LeaseGrantRequest grant{request->ttl_ms(), request->namespace_()};
  if (identity.kind == auth::Identity::Kind::kJob) {
    if (grant.owner.empty()) grant.owner = identity.job_id;
    if (grant.owner != identity.job_id) {
      return FinishNow(
          context, absl::PermissionDeniedError(absl::StrCat(
                       "/ddp.v1.KeyValueService/LeaseGrant: the token of job '", identity.job_id,
                       "' grants leases of its own namespace only, "
                       "not of '",
                       kv::AbbreviateForMessage(grant.owner), "'")));
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  store_.LeaseGrantAsync(std::move(grant),
                         [reactor, response](absl::StatusOr<kv::LeaseGrantResult> r) {
                           if (r.ok()) {
                             response->set_lease(r->lease);
                             response->set_ttl_ms(r->ttl_ms);
                           }
                           reactor->Finish(ToGrpcStatus(r.status()));
                         });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcKvService::LeaseKeepAlive(grpc::CallbackServerContext* context,
                                                        const v1::LeaseKeepAliveRequest* request,
                                                        v1::LeaseKeepAliveResponse* response) {
  const auth::Identity identity = CallIdentity(options_.authorizer, *context);
  if (absl::Status allowed = AuthorizeCall(options_.authorizer, identity,
                                           "/ddp.v1.KeyValueService/LeaseKeepAlive", "");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  absl::StatusOr<kv::LeaseKeepAliveResult> r =
      store_.LeaseKeepAlive(request->lease(), LeaseCallerOf(identity));
  if (r.ok()) {
    response->set_lease(r->lease);
    response->set_ttl_ms(r->ttl_ms);
  }
  return FinishNow(context, r.status());
}

grpc::ServerUnaryReactor* GrpcKvService::LeaseList(grpc::CallbackServerContext* context,
                                                   const v1::LeaseListRequest* /*request*/,
                                                   v1::LeaseListResponse* response) {
  const auth::Identity identity = CallIdentity(options_.authorizer, *context);
  if (absl::Status allowed =
          AuthorizeCall(options_.authorizer, identity, "/ddp.v1.KeyValueService/LeaseList", "");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  for (kv::LeaseId id : store_.LeaseList(LeaseCallerOf(identity))) response->add_leases(id);
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* GrpcKvService::LeaseTimeToLive(grpc::CallbackServerContext* context,
                                                         const v1::LeaseTimeToLiveRequest* request,
                                                         v1::LeaseTimeToLiveResponse* response) {
  const auth::Identity identity = CallIdentity(options_.authorizer, *context);
  if (absl::Status allowed = AuthorizeCall(options_.authorizer, identity,
                                           "/ddp.v1.KeyValueService/LeaseTimeToLive", "");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  absl::StatusOr<kv::LeaseTimeToLiveResult> r =
      store_.LeaseTimeToLive(request->lease(), request->keys(), LeaseCallerOf(identity));
  if (r.ok()) {
    response->set_lease(r->lease);
    response->set_remaining_ms(r->remaining_ms);
    response->set_granted_ttl_ms(r->granted_ttl_ms);
    for (const auto& [ns, key] : r->keys) {
      v1::LeaseKeyRef* ref = response->add_keys();
      ref->set_namespace_(ns);
      ref->set_key(key);
    }
  }
  return FinishNow(context, r.status());
}

grpc::ServerUnaryReactor* GrpcKvService::LeaseRevoke(grpc::CallbackServerContext* context,
                                                     const v1::LeaseRevokeRequest* request,
                                                     v1::LeaseRevokeResponse* response) {
  const auth::Identity identity = CallIdentity(options_.authorizer, *context);
  if (absl::Status allowed =
          AuthorizeCall(options_.authorizer, identity, "/ddp.v1.KeyValueService/LeaseRevoke", "");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  store_.LeaseRevokeAsync(request->lease(), LeaseCallerOf(identity),
                          [reactor, response](absl::StatusOr<kv::LeaseRevokeResult> r) {
                            if (r.ok()) {
                              response->set_deleted(r->deleted);
                              response->set_revision(r->revision);
                            }
                            reactor->Finish(ToGrpcStatus(r.status()));
                          });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcKvService::Compact(grpc::CallbackServerContext* context,
                                                 const v1::CompactRequest* request,
                                                 v1::CompactResponse* response) {
  if (absl::Status allowed =
          AuthorizeCall(options_.authorizer, *context, "/ddp.v1.KeyValueService/Compact", "");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  store_.CompactAsync(request->revision(),
                      [reactor, response](absl::StatusOr<kv::CompactResult> r) {
                        if (r.ok()) response->set_compacted_revision(r->compacted_revision);
                        reactor->Finish(ToGrpcStatus(r.status()));
                      });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcKvService::Status(grpc::CallbackServerContext* context,
                                                const v1::StatusRequest* /*request*/,
                                                v1::StatusResponse* response) {
  if (absl::Status allowed =
          AuthorizeCall(options_.authorizer, *context, "/ddp.v1.KeyValueService/Status", "");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  const kv::KvStoreStatus status = store_.Status();
  response->set_revision(status.revision);
  response->set_compacted_revision(status.compacted_revision);
  response->set_keys(status.keys);
  response->set_leases(status.leases);
  response->set_watchers(status.watchers);
  response->set_version(options_.version);
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* GrpcKvService::ListNamespaces(
    grpc::CallbackServerContext* context, const v1::ListNamespacesRequest* /*request*/,
    v1::ListNamespacesResponse* response) {
  const auth::Identity caller = CallIdentity(options_.authorizer, *context);
  if (absl::Status allowed =
          AuthorizeCall(options_.authorizer, caller, "/ddp.v1.KeyValueService/ListNamespaces", "");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  const kv::NamespaceList list = store_.ListNamespaces();
  response->set_revision(list.revision);
  for (const kv::NamespaceKeys& ns : list.namespaces) {
    if (caller.kind == auth::Identity::Kind::kJob && caller.job_id != ns.ns) continue;
    v1::NamespaceInfo* info = response->add_namespaces();
    info->set_namespace_(ns.ns);
    info->set_keys(ns.keys);
  }
  return FinishNow(context, absl::OkStatus());
}

}  // namespace ddp::rpc
