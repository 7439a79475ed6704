#ifndef DDP_TOOLS_KV_BENCH_LOAD_RUNNER_H_
#define DDP_TOOLS_KV_BENCH_LOAD_RUNNER_H_

// The closed-loop load driver of kv_bench, in plain C++: N client threads each
// issue one operation after another for a fixed time; the runner records every
// latency and reports throughput and percentiles. What an operation does
// (a gRPC call to ddp or etcd) is the caller's function.
//
// Thread-safety: RunClosedLoop calls `op` concurrently from `clients` threads,
// each with its own client index; `op` must be safe for that.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ddp::kv_bench {

// One operation of client `client`, its `seq`-th. Returns an empty string on
// success, else the error (counted, the first one kept).
using Operation = std::function<std::string(int client, int64_t seq)>;

struct LoadOptions {
  int clients = 1;
  absl::Duration duration = absl::Seconds(3);
  // Not measured: each client runs this long first (connections, caches).
  absl::Duration warmup = absl::Milliseconds(300);
};

struct LoadResult {
  int64_t ops = 0;  // Successful operations in the measured window.
  int64_t errors = 0;
  std::string first_error;
  double ops_per_second = 0;
  absl::Duration p50;
  absl::Duration p99;
  absl::Duration max;
};

LoadResult RunClosedLoop(const LoadOptions& options, const Operation& op);

// The q-quantile (0..1) of `samples` (sorted in place); zero when empty.
absl::Duration Quantile(std::vector<absl::Duration>& samples, double q);

// "12.3 ms" / "850 us".
std::string FormatLatency(absl::Duration d);

}  // namespace ddp::kv_bench

#endif  // DDP_TOOLS_KV_BENCH_LOAD_RUNNER_H_
