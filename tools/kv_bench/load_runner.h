#ifndef DDP_TOOLS_KV_BENCH_LOAD_RUNNER_H_
#define DDP_TOOLS_KV_BENCH_LOAD_RUNNER_H_

// The closed-loop load driver of kv_bench, in plain C++: N logical clients
// each keep exactly one asynchronous operation in flight for a fixed time (the
// next one starts when the previous one completes); the runner records every
// latency and reports throughput and percentiles. What an operation does (a
// gRPC callback-API call to ddp or etcd) is the caller's function.
//
// No thread per client: clients are continuations, run on whatever thread
// completes an operation (gRPC's callback threads). With a thread per client
// the load generator itself spent more CPU per call than the server under test
// (256 blocked threads, a context switch per call), on the same 2 cores.
//
// Thread-safety: RunClosedLoop calls `start` concurrently from many threads,
// but never twice at once for one client index. OperationDone::Done may be
// called from any thread, including inline from inside `start`.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ddp::kv_bench {

// Where an operation reports its end: exactly once per started operation.
class OperationDone {
 public:
  virtual ~OperationDone() = default;
  // `error` is empty on success, else the error (counted, the first kept).
  virtual void Done(int client, absl::string_view error) = 0;
};

// Starts client `client`'s `seq`-th operation; it must call done.Done(client,
// ...) once when the operation ends.
using AsyncOperation = std::function<void(int client, int64_t seq, OperationDone& done)>;

struct LoadOptions {
  int clients = 1;
  absl::Duration duration = absl::Seconds(3);
  // Not measured: each client runs this long first (connections, caches).
  absl::Duration warmup = absl::Milliseconds(300);
  // Called on the runner's thread when the measured window opens and when it
  // closes (e.g. to read CPU counters); may be empty.
  std::function<void()> on_window_start;
  std::function<void()> on_window_end;
  // How long the runner waits after the window for the last operations to end
  // (without a call deadline, a hung server would otherwise hang the run).
  absl::Duration drain_timeout = absl::Seconds(60);
};

struct LoadResult {
  int64_t ops = 0;  // Successful operations started in the measured window.
  int64_t errors = 0;
  std::string first_error;
  double ops_per_second = 0;
  absl::Duration p50;
  absl::Duration p99;
  absl::Duration max;
  // Clients whose last operation had not ended after drain_timeout; their
  // operations may still complete later (the runner's state is then kept
  // alive for them), so the caller must not reuse the clients' targets.
  int stuck_clients = 0;
};

// Runs the load and returns once every client's last operation has ended, or
// drain_timeout after the window closed (see stuck_clients).
LoadResult RunClosedLoop(const LoadOptions& options, const AsyncOperation& start);

// The q-quantile (0..1) of `samples` (sorted in place); zero when empty.
absl::Duration Quantile(std::vector<absl::Duration>& samples, double q);

// "12.3 ms" / "850 us".
std::string FormatLatency(absl::Duration d);

}  // namespace ddp::kv_bench

#endif  // DDP_TOOLS_KV_BENCH_LOAD_RUNNER_H_
