#ifndef DDP_COORDINATOR_COMMIT_COMMIT_LOOP_H_
#define DDP_COORDINATOR_COMMIT_COMMIT_LOOP_H_

// The coordinator's one commit pipeline, a Ready loop in the manner of etcd's
// raft node: take what is ready, persist it, then send what it produced.
//
//   participants (KvStore, RendezvousService) queue their changes and Notify()
//   commit thread   ("commit")   wakes; every participant's Prepare() adds
//                                 its queued changes to ONE StateBatch; the
//                                 StateStore commits it in ONE transaction;
//                                 every participant's Finish() learns the
//                                 outcome and hands over what may now leave
//                                 (replies, agent messages, watch events)
//   delivery thread ("deliver")  runs those sends, batch after batch, in
//                                 commit order, while the commit thread
//                                 already persists the next batch
//   ticker thread   ("tick")     calls every participant's Tick() each
//                                 tick_interval (lease, wait and job timeouts)
//
// So nothing leaves the coordinator before the change it reports is durable,
// and everything leaves in the order it was committed. A batch with nothing
// to persist (a heartbeat's ack) skips the store and goes straight to Finish.
// After a failed commit the loop waits retry_interval before the next one
// (participants decide what a failure means for their changes: KV writes fail,
// job changes are retried).
//
// Lifecycle:  construct --Add()...--> Start --> running --Shutdown--> stopped
// Shutdown stops the ticker, commits and sends what is queued (one last try if
// the store fails), then stops the threads. Participants must outlive the
// loop's threads (call Shutdown before destroying them).
//
// Thread-safety: thread-safe. Prepare/Finish run on the commit thread, sends
// on the delivery thread, Tick on the ticker thread: never two of one kind at
// once.

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/commit/state_store.h"

namespace ddp::commit {

// What a participant hands over after a commit: closures run on the delivery
// thread, in order.
using Sends = std::vector<std::function<void()>>;

class CommitParticipant {
 public:
  virtual ~CommitParticipant() = default;
  // Commit thread: moves what waits to be committed into `batch` (its own
  // part: KV or jobs). Returns true when it left work queued (a bounded
  // batch): the loop runs again at once.
  virtual bool Prepare(StateBatch& batch) = 0;
  // Commit thread, after the batch: `status` is its outcome (OK: durable).
  // May take its own part back out of `batch` (it is discarded next).
  // Appends what may now be sent to `sends`.
  virtual void Finish(const absl::Status& status, StateBatch& batch, Sends& sends) = 0;
  // Ticker thread: timeouts.
  virtual void Tick() {}
};

struct CommitLoopOptions {
  // Cadence of Tick(); zero: no ticker thread (tests call Tick()).
  absl::Duration tick_interval = absl::Milliseconds(50);
  // Pause after a failed commit before the next try.
  absl::Duration retry_interval = absl::Milliseconds(200);
  // Called on the commit thread after each durable commit with what it held
  // (KV writes are counted by the KV part's events) and its time; for
  // metrics, keep it cheap.
  std::function<void(const StateBatch& batch, absl::Duration took)> on_commit;
  // Times each commit for on_commit; null: MonotonicClock. Must outlive the
  // loop.
  const Clock* clock = nullptr;
};

class CommitLoop {
 public:
  // `store` must outlive the loop.
  CommitLoop(StateStore& store, CommitLoopOptions options);
  ~CommitLoop();  // Shutdown()
  CommitLoop(const CommitLoop&) = delete;
  CommitLoop& operator=(const CommitLoop&) = delete;

  // Before Start: Prepare and Finish are called in the order participants
  // were added.
  void Add(CommitParticipant* participant);
  // The same, for an adapter the loop keeps (destroyed with the loop), e.g.
  // the one that joins a KvStore (kv_participant.h).
  void Add(std::unique_ptr<CommitParticipant> participant);
  void Start();

  // Something waits to be committed or sent: wakes the commit thread.
  void Notify();
  // Returns once everything notified before the call was committed (or
  // failed) and its sends ran. Not from the commit or delivery thread.
  void Flush();
  // See "Lifecycle". Idempotent.
  void Shutdown();
  // Every participant's Tick() (the ticker thread's body; tests).
  void Tick();

  StateStore& store() { return store_; }

 private:
  struct Delivery {
    uint64_t through = 0;  // the Notify() sequence this batch covers
    Sends sends;
  };
  void CommitThread();
  void DeliveryThread();
  void TickerThread();
  // One pass: prepare, commit, finish. Returns the commit's status.
  absl::Status RunOnce(uint64_t through);

  StateStore& store_;
  const CommitLoopOptions options_;
  const Clock& clock_;  // options_.clock or MonotonicClock
  std::vector<CommitParticipant*> participants_;
  std::vector<std::unique_ptr<CommitParticipant>> owned_participants_;

  absl::Mutex mu_;
  uint64_t notified_ ABSL_GUARDED_BY(mu_) = 0;  // Notify() calls so far
  uint64_t taken_ ABSL_GUARDED_BY(mu_) = 0;     // notifications the commit thread took
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;      // notifications whose sends ran
  bool more_ ABSL_GUARDED_BY(mu_) = false;      // a participant left work queued
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // commit thread: finish and exit
  bool ticker_stop_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // the threads are gone

  absl::Mutex delivery_mu_;
  std::vector<Delivery> deliveries_ ABSL_GUARDED_BY(delivery_mu_);
  bool delivery_stopping_ ABSL_GUARDED_BY(delivery_mu_) = false;

  std::thread commit_;
  std::thread delivery_;
  std::thread ticker_;
};

}  // namespace ddp::commit

#endif  // DDP_COORDINATOR_COMMIT_COMMIT_LOOP_H_
