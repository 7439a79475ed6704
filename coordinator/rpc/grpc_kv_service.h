#ifndef DDP_COORDINATOR_RPC_GRPC_KV_SERVICE_H_
#define DDP_COORDINATOR_RPC_GRPC_KV_SERVICE_H_

// ddp.v1.KeyValueService over the KvStore core, with gRPC's callback API: no
// thread is blocked per pending call. Unary calls return a reactor that the
// core's completion callback finishes. Watch runs on the async API over the
// server's stream queues (async_watch_calls.h), with one write in flight that
// pulls the next batch from the store when the previous write completes (the
// per-watcher queue lives in the core and is bounded there).
//
//   GrpcKvService kv(store, options);
//   kv.RegisterWith(builder, queues);   // the service, and Watch on `queues`
//   ... queues.RegisterWith(builder); BuildAndStart; queues.Start(); ...
//
// Sizes and counts are checked before anything is copied out of a request; the
// core checks everything again. Errors keep the core's code and message
// (common/grpc_status).
//
// Thread-safety: thread-safe; `store` must outlive the service and the gRPC
// server.

#include <functional>
#include <string>

#include "common/version.h"
#include "coordinator/auth/authorizer.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/rpc/async_stream_queues.h"
#include "coordinator/rpc/async_watch_calls.h"
#include "ddp/v1/kv.grpc.pb.h"
#include "grpcpp/server_builder.h"

namespace ddp::rpc {

struct GrpcKvServiceOptions {
  std::string version = std::string("ddp-coordinator ") + kVersion;  // reported by Status
  // Watch messages are cut at about this size (a single event may exceed it).
  size_t watch_message_bytes = 1 << 20;
  // PutStream: puts of one stream in the store or waiting to be answered,
  // at most (the stream stops reading beyond).
  size_t put_stream_max_in_flight = 1024;
  // Checks every call's bearer token (null: no checks).
  const auth::Authorizer* authorizer = nullptr;
  // Snapshot: makes a consistent copy of the database in a new file and
  // returns its path (the stream sends it, then removes it); null: the store
  // has no file to copy (etcd), Snapshot is FAILED_PRECONDITION.
  std::function<absl::StatusOr<std::string>()> snapshot;
  // Snapshot messages carry at most this many bytes of the file.
  size_t snapshot_chunk_bytes = 1 << 20;
};

class GrpcKvService final : public KvServiceWithAsyncWatch {
 public:
  GrpcKvService(kv::KvStore& store, GrpcKvServiceOptions options);

  // Adds the service to `builder` and its Watch calls to `queues` (before
  // queues.RegisterWith).
  void RegisterWith(grpc::ServerBuilder& builder, AsyncStreamQueues& queues);

  grpc::ServerUnaryReactor* Put(grpc::CallbackServerContext* context, const v1::PutRequest* request,
                                v1::PutResponse* response) override;
  grpc::ServerBidiReactor<v1::PutStreamRequest, v1::PutStreamResponse>* PutStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context, const v1::GetRequest* request,
                                v1::GetResponse* response) override;
  grpc::ServerUnaryReactor* Range(grpc::CallbackServerContext* context,
                                  const v1::RangeRequest* request,
                                  v1::RangeResponse* response) override;
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const v1::DeleteRequest* request,
                                   v1::DeleteResponse* response) override;
  grpc::ServerUnaryReactor* CompareAndSet(grpc::CallbackServerContext* context,
                                          const v1::CompareAndSetRequest* request,
                                          v1::CompareAndSetResponse* response) override;
  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context, const v1::AddRequest* request,
                                v1::AddResponse* response) override;
  grpc::ServerUnaryReactor* Wait(grpc::CallbackServerContext* context,
                                 const v1::WaitRequest* request,
                                 v1::WaitResponse* response) override;
  // Copies on the calling gRPC thread (VACUUM INTO: seconds for a large
  // database), then streams from the reactor.
  grpc::ServerWriteReactor<v1::SnapshotChunk>* Snapshot(
      grpc::CallbackServerContext* context, const v1::SnapshotRequest* request) override;
  grpc::ServerUnaryReactor* LeaseGrant(grpc::CallbackServerContext* context,
                                       const v1::LeaseGrantRequest* request,
                                       v1::LeaseGrantResponse* response) override;
  grpc::ServerUnaryReactor* LeaseKeepAlive(grpc::CallbackServerContext* context,
                                           const v1::LeaseKeepAliveRequest* request,
                                           v1::LeaseKeepAliveResponse* response) override;
  grpc::ServerUnaryReactor* LeaseList(grpc::CallbackServerContext* context,
                                      const v1::LeaseListRequest* request,
                                      v1::LeaseListResponse* response) override;
  grpc::ServerUnaryReactor* LeaseTimeToLive(grpc::CallbackServerContext* context,
                                            const v1::LeaseTimeToLiveRequest* request,
                                            v1::LeaseTimeToLiveResponse* response) override;
  grpc::ServerUnaryReactor* LeaseRevoke(grpc::CallbackServerContext* context,
                                        const v1::LeaseRevokeRequest* request,
                                        v1::LeaseRevokeResponse* response) override;
  grpc::ServerUnaryReactor* Compact(grpc::CallbackServerContext* context,
                                    const v1::CompactRequest* request,
                                    v1::CompactResponse* response) override;
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const v1::StatusRequest* request,
                                   v1::StatusResponse* response) override;
  // A job's token sees the namespace of its job alone.
  grpc::ServerUnaryReactor* ListNamespaces(grpc::CallbackServerContext* context,
                                           const v1::ListNamespacesRequest* request,
                                           v1::ListNamespacesResponse* response) override;

 private:
  kv::KvStore& store_;
  const GrpcKvServiceOptions options_;
  AsyncWatchCalls watch_calls_;
};

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_GRPC_KV_SERVICE_H_
