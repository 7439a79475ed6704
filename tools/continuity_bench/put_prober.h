#ifndef DDP_TOOLS_CONTINUITY_BENCH_PUT_PROBER_H_
#define DDP_TOOLS_CONTINUITY_BENCH_PUT_PROBER_H_

// The continuity benchmark's writer: one thread doing durable KV puts through
// the coordinators' gRPC KeyValueService (tests/ha FailoverKvClient: a
// standby's refusal goes to the leader it names, a dead coordinator to the
// next one), one every `interval`, and noting when each was acknowledged.
// A put acknowledged is committed (the coordinator replies after its commit).
//
// Thread-safety: thread-safe.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tests/ha/failover_kv_client.h"

namespace ddp::continuity_bench {

class PutProber {
 public:
  // `targets`: the coordinators, "a:1,b:2,c:3" (or one).
  PutProber(const std::string& targets, absl::Duration interval);
  ~PutProber();  // Stop()
  PutProber(const PutProber&) = delete;
  PutProber& operator=(const PutProber&) = delete;

  void Start();
  void Stop();

  // When each acknowledged put came back, in order.
  std::vector<absl::Time> Acks() const;
  int64_t failed() const { return failed_.load(); }

 private:
  void Run();

  const absl::Duration interval_;
  testing::FailoverKvClient client_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> failed_{0};
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::vector<absl::Time> acks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::continuity_bench

#endif  // DDP_TOOLS_CONTINUITY_BENCH_PUT_PROBER_H_
