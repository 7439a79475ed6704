#ifndef DDP_COORDINATOR_RPC_ASYNC_WATCH_CALLS_H_
#define DDP_COORDINATOR_RPC_ASYNC_WATCH_CALLS_H_

// KeyValueService.Watch on gRPC's async API, served on the coordinator's
// stream queues (AsyncStreamQueues, which says why: on the callback API every
// open stream of the process shares one completion queue, and each
// notification scanned all of them). Each call carries a WatchStream
// (watch_stream.h). The request arrives as bytes: one that does not parse
// ends the call INVALID_ARGUMENT naming the method and the type expected.
//
// A write the store's notifier starts (a commit fanned out to every watcher)
// is carried out by the stream's queue thread (AsyncStreamQueue::Hand), so
// that a fan-out runs on every queue's thread at once; the queue thread
// itself writes at once. A call's end (a cancelled client, a broken
// connection) comes as AsyncNotifyWhenDone's tag: a watch keeps no read
// pending.
//
// Thread-safety: thread-safe. The store, the service and the authorizer must
// outlive the queues' Stop.

#include <cstddef>

#include "coordinator/auth/authorizer.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/rpc/async_stream_queues.h"
#include "ddp/v1/kv.grpc.pb.h"

namespace ddp::rpc {

// The KeyValueService whose Watch is raw and async, every other method on
// the callback API. gRPC drops a method's handler only when a sync method is
// marked raw (not a callback one: WithRawMethod_Watch<CallbackService> would
// keep the callback handler and never serve the async requests), so this is
// the generated CallbackService's list with Watch made raw first. A method
// added to kv.proto is added here.
namespace kv_service_internal {
using KV = v1::KeyValueService;
using WithAsyncWatch = KV::WithCallbackMethod_Put<KV::WithCallbackMethod_PutStream<
    KV::WithCallbackMethod_Get<KV::WithCallbackMethod_Range<KV::WithCallbackMethod_Delete<
        KV::WithCallbackMethod_CompareAndSet<KV::WithCallbackMethod_Add<
            KV::WithCallbackMethod_Wait<KV::WithCallbackMethod_LeaseGrant<
                KV::WithCallbackMethod_LeaseKeepAlive<KV::WithCallbackMethod_LeaseRevoke<
                    KV::WithCallbackMethod_LeaseList<KV::WithCallbackMethod_LeaseTimeToLive<
                        KV::WithCallbackMethod_Compact<KV::WithCallbackMethod_Status<
                            KV::WithCallbackMethod_ListNamespaces<KV::WithCallbackMethod_Snapshot<
                                KV::WithRawMethod_Watch<KV::Service>>>>>>>>>>>>>>>>>>;
}  // namespace kv_service_internal
using KvServiceWithAsyncWatch = kv_service_internal::WithAsyncWatch;

class AsyncWatchCalls final : public AsyncQueuedMethod {
 public:
  // Watch messages are cut at about `max_message_bytes`; `authorizer` (may be
  // null) checks each call's token and ends the stream when it is revoked.
  AsyncWatchCalls(KvServiceWithAsyncWatch* service, kv::KvStore& store, size_t max_message_bytes,
                  const auth::Authorizer* authorizer);

  // AsyncQueuedMethod.
  void RequestOn(AsyncStreamQueue& queue) override;

 private:
  friend class AsyncWatchCall;
  KvServiceWithAsyncWatch* const service_;
  kv::KvStore& store_;
  const size_t max_message_bytes_;
  const auth::Authorizer* const authorizer_;
};

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_ASYNC_WATCH_CALLS_H_
