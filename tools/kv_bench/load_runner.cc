#include "tools/kv_bench/load_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace ddp::kv_bench {

absl::Duration Quantile(std::vector<absl::Duration>& samples, double q) {
  if (samples.empty()) return absl::ZeroDuration();
  std::sort(samples.begin(), samples.end());
  const size_t index = std::min(
      samples.size() - 1,
      static_cast<size_t>(std::ceil(q * samples.size())) - (q > 0 ? 1 : 0));
  return samples[index];
}

std::string FormatLatency(absl::Duration d) {
  const double us = absl::ToDoubleMicroseconds(d);
  if (us < 1000) return absl::StrFormat("%.0f us", us);
  return absl::StrFormat("%.2f ms", us / 1000);
}

LoadResult RunClosedLoop(const LoadOptions& options, const Operation& op) {
  const absl::Time start = absl::Now();
  const absl::Time measure_from = start + options.warmup;
  const absl::Time end = measure_from + options.duration;
  absl::Mutex mu;
  std::vector<absl::Duration> all_latencies;
  LoadResult result;
  std::vector<std::thread> threads;
  for (int client = 0; client < options.clients; ++client) {
    threads.emplace_back([&, client] {
      std::vector<absl::Duration> latencies;
      int64_t errors = 0;
      std::string first_error;
      for (int64_t seq = 0;; ++seq) {
        const auto begin = std::chrono::steady_clock::now();
        const absl::Time now = absl::Now();
        if (now >= end) break;
        const std::string error = op(client, seq);
        const absl::Duration latency =
            absl::FromChrono(std::chrono::steady_clock::now() - begin);
        if (now < measure_from) continue;
        if (!error.empty()) {
          if (errors++ == 0) first_error = error;
          continue;
        }
        latencies.push_back(latency);
      }
      absl::MutexLock lock(&mu);
      all_latencies.insert(all_latencies.end(), latencies.begin(),
                           latencies.end());
      result.errors += errors;
      if (result.first_error.empty()) result.first_error = first_error;
    });
  }
  for (std::thread& thread : threads) thread.join();
  result.ops = all_latencies.size();
  result.ops_per_second = result.ops / absl::ToDoubleSeconds(options.duration);
  result.p50 = Quantile(all_latencies, 0.50);
  result.p99 = Quantile(all_latencies, 0.99);
  result.max = Quantile(all_latencies, 1.0);
  return result;
}

}  // namespace ddp::kv_bench
