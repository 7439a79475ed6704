#ifndef DDP_CLIENT_AGENT_WORKER_LEASE_H_
#define DDP_CLIENT_AGENT_WORKER_LEASE_H_

// The agent's side of the lease (ddp/v1/session.proto): how long this node's
// workers may run without word from the coordinator. The coordinator grants
// `lease` in Registered; every HeartbeatAck (and every Registered) renews the
// lease from the moment the agent SENT that heartbeat (or Register), so the
// agent's lease always ends before the coordinator, counting
// heartbeat_timeout from the receipt, may declare the node lost.
//
// When the lease runs out the workers are FROZEN (SIGSTOP), not stopped: the
// agent cannot tell a coordinator that is down (restarting, failing over) from
// one that is cut off from it and may start another generation. A frozen
// generation runs no instruction until the coordinator says it is still the
// running one (a renewal naming it), and is then thawed (SIGCONT) where it
// stopped; a generation that was superseded is killed without running again
// (the agent stops frozen workers with SIGKILL, WorkerSupervisor).
//
//   armed(g) --lease runs out--> frozen(g) --Renewed(sent_at, g), valid--> armed(g)
//      |                            |        (thawed; no worker restarted)
//      |                            +--Stopping/Disarm/Arm(g')--> (killed by the agent)
//      +--Stopping/Disarm--> disarmed
//
//   Renewed(sent_at, g)   the lease runs until sent_at + lease; g: the
//                         generation the coordinator lets run (0: none)
//   Arm(g)                workers of generation g run: enforce the lease
//   Stopping()            the agent began stopping them
//   Disarm()              no workers run
//   lease runs out, armed FreezeWorkers(true), then Expired(g) once
//   renewed for g, frozen FreezeWorkers(false) once the lease is valid again
//
// It also publishes the lease to the workers, atomically (write + rename), in
// `lease_file` (DDP_LEASE_FILE; docs/worker-contract.md):
//   {"generation": g, "current": true, "valid_until_monotonic": 1234.5}
// `current`: workers of g run and may act (the coordinator's running
// generation is g, no stop has begun, the lease is valid, not frozen);
// `valid_until_monotonic`: when the lease ends on CLOCK_MONOTONIC (Python's
// time.monotonic()), null without a lease. A worker checks it before an
// external side effect such as writing a checkpoint.
//
// Thread: "worker-lease" sleeps until the next deadline (at most `poll` at a
// time, so a FakeClock moved by a test is noticed) or until a renewal arrives
// while frozen.
// Thread-safety: every method is thread-safe; the callbacks run on the
// lease thread without the lock held.

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ddp::client {

class WorkerLease {
 public:
  struct Options {
    std::string lease_file;  // empty: none
    absl::Duration poll = absl::Milliseconds(50);
  };
  // true: SIGSTOP every worker's process group; false: SIGCONT.
  using FreezeWorkers = std::function<void(bool freeze)>;
  using Expired = std::function<void(int64_t generation)>;

  // `clock` must be monotonic in production (MonotonicClock): the lease file
  // states its deadline on that clock.
  WorkerLease(const Clock& clock, Options options, FreezeWorkers freeze_workers, Expired expired);
  ~WorkerLease();
  WorkerLease(const WorkerLease&) = delete;
  WorkerLease& operator=(const WorkerLease&) = delete;

  // From Registered.lease_ms; zero: none is granted (the workers run however
  // long the coordinator is silent).
  void Configure(absl::Duration lease);
  void Renewed(absl::Time sent_at, int64_t running_generation);
  void Arm(int64_t generation);
  void Stopping();
  void Disarm();

  // Blocks until the lease is valid (or none is granted), at most `bound` on
  // the lease's clock; false when it is still not. Workers start only under a
  // valid lease: after a resume whose Register waited in the network, the
  // Register's send time is too old, and the first acknowledged heartbeat of
  // the new stream renews it.
  bool AwaitValid(absl::Duration bound);

  // When the lease ends (InfiniteFuture without one); for tests and logs.
  absl::Time expiry() const;
  // Whether the armed workers are frozen now.
  bool frozen() const;

 private:
  void Loop();
  absl::Time ExpiryLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CurrentLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock& clock_;
  const Options options_;
  const FreezeWorkers freeze_workers_;
  const Expired expired_;

  mutable absl::Mutex mu_;
  absl::Duration lease_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  absl::Time renewed_from_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t running_generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t armed_generation_ ABSL_GUARDED_BY(mu_) = 0;  // 0: disarmed
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool frozen_ ABSL_GUARDED_BY(mu_) = false;  // the armed generation's workers
  absl::Time frozen_at_ ABSL_GUARDED_BY(mu_);
  bool renewal_pending_ ABSL_GUARDED_BY(mu_) = false;  // wakes the loop while frozen
  bool publish_failed_ ABSL_GUARDED_BY(mu_) = false;   // warned once
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_WORKER_LEASE_H_
