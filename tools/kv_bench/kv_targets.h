#ifndef DDP_TOOLS_KV_BENCH_KV_TARGETS_H_
#define DDP_TOOLS_KV_BENCH_KV_TARGETS_H_

// The systems kv_bench drives over real gRPC: the ddp coordinator
// (ddp.v1.KeyValueService) and etcd 3.4 (etcdserverpb.KV / Watch). Calls use
// gRPC's callback API; the logical clients are spread round-robin over a few
// channels, each with its own TCP connection (as etcd's own benchmark tool
// multiplexes --clients over --conns).
//
// Errors are reported as strings ("gRPC code N: message"); empty is success.
// Thread-safety: a KvTarget is shared; each client index must have at most one
// operation in flight. WatchFanout is driven by one thread.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "tools/kv_bench/load_runner.h"

namespace ddp::kv_bench {

class KvTarget {
 public:
  virtual ~KvTarget() = default;
  virtual std::string name() const = 0;
  // Creates `connections` channels and the state of `clients` clients (call
  // before any operation, and not while operations are in flight). Each call
  // gets `deadline` (zero: none).
  virtual void Connect(int clients, int connections, absl::Duration deadline) = 0;
  // Asynchronous operations: `done.Done(client, error)` runs once when the
  // call ends, on a gRPC thread.
  virtual void Put(int client, std::string key, const std::string& value, OperationDone& done) = 0;
  virtual void Get(int client, std::string key, OperationDone& done) = 0;
  // Adds 1 to an integer key; false from SupportsAdd when there is none.
  virtual bool SupportsAdd() const = 0;
  virtual void Add(int client, const std::string& key, OperationDone& done) = 0;
};

std::unique_ptr<KvTarget> NewDdpTarget(const std::string& address, const std::string& name_space);
// The coordinator with its puts on KeyValueService.PutStream, one stream per
// connection (each put answered on its own, as durable as a Put).
std::unique_ptr<KvTarget> NewDdpStreamTarget(const std::string& address,
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
