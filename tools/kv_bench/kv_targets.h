#ifndef DDP_TOOLS_KV_BENCH_KV_TARGETS_H_
#define DDP_TOOLS_KV_BENCH_KV_TARGETS_H_

// The systems kv_bench drives over real gRPC: the ddp coordinator
// (ddp.v1.KeyValueService) and etcd 3.4 (etcdserverpb.KV / Watch). Each client
// gets its own channel with distinct channel args, so clients spread over
// several TCP connections instead of sharing one.
//
// Errors are returned as strings ("CODE: message"); empty means success.
// Thread-safety: a KvTarget is shared; each client index must be used by one
// thread at a time. WatchFanout is driven by one thread.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"

namespace ddp::kv_bench {

class KvTarget {
 public:
  virtual ~KvTarget() = default;
  virtual std::string name() const = 0;
  // Creates the per-client channels (call before any operation).
  virtual void Connect(int clients) = 0;
  virtual std::string Put(int client, const std::string& key,
                          const std::string& value) = 0;
  virtual std::string Get(int client, const std::string& key) = 0;
  // Adds 1 to an integer key; false from SupportsAdd when there is none.
  virtual bool SupportsAdd() const = 0;
  virtual std::string Add(int client, const std::string& key) = 0;
};

std::unique_ptr<KvTarget> NewDdpTarget(const std::string& address,
                                       const std::string& name_space);
std::unique_ptr<KvTarget> NewEtcdTarget(const std::string& address);

// `watchers` watch streams on one key; each Round puts the key once and
// measures the time from sending the put until the last watcher has the event.
class WatchFanout {
 public:
  virtual ~WatchFanout() = default;
  // Opens the streams and waits until all are registered. Error string or "".
  virtual std::string Start(int watchers, const std::string& key) = 0;
  // One put; the time until every watcher got it, or an error.
  virtual std::string Round(int64_t round, absl::Duration* last_notified) = 0;
  virtual void Stop() = 0;
};

std::unique_ptr<WatchFanout> NewDdpWatchFanout(const std::string& address,
                                               const std::string& name_space);
std::unique_ptr<WatchFanout> NewEtcdWatchFanout(const std::string& address);

}  // namespace ddp::kv_bench

#endif  // DDP_TOOLS_KV_BENCH_KV_TARGETS_H_
