#ifndef DDP_COORDINATOR_RENDEZVOUS_WRITE_BEHIND_QUEUE_H_
#define DDP_COORDINATOR_RENDEZVOUS_WRITE_BEHIND_QUEUE_H_

// Group commit for the rendezvous core: job changes wait here, in order, until
// one background writer makes a whole batch of them durable in one
// transaction (one fsync for hundreds of joins instead of one each), and every
// message or event that those changes produced is held back until then.
//
//   Add(changes)  -> pending (batch `next`)
//   Hold(outbox)  -> held, tagged with the batch it must wait for; released
//                    unchanged when nothing is pending or in flight
//   TakeBatch()   -> pending becomes the batch in flight (one at a time)
//   Committed()   -> held entries up to that batch go to the outbox, in order,
//                    and the callbacks waiting for it are returned
//   Failed()      -> the batch goes back in front of newer changes (retried)
//
// Batches are numbered from 1 and commit in order; Mark() is the number of the
// batch after whose commit everything added so far is durable (the last
// committed one when nothing waits), so a caller that must not acknowledge
// before durability waits for Mark() (WhenDurable).
//
// Thread-safety: not thread-safe; JobRegistry calls it under its mutex.

#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/rendezvous/job_types.h"

namespace ddp::rendezvous {

class WriteBehindQueue {
 public:
  struct Batch {
    uint64_t number = 0;  // 0: nothing to write
    std::vector<JobChanges> changes;
  };

  // Queues `changes` for the next batch (ignored when empty).
  void Add(JobChanges changes);
  // Moves `outbox`'s messages and events behind the pending or in-flight
  // batch; leaves them in `outbox` when nothing waits for durability.
  void Hold(Outbox& outbox);

  bool has_pending() const { return !pending_.empty(); }
  bool in_flight() const { return in_flight_ != 0; }
  uint64_t committed() const { return committed_; }
  uint64_t Mark() const;
  size_t pending_changes() const { return pending_.size(); }
  size_t held_messages() const { return held_messages_; }

  // Takes every pending change as the next batch. Requires !in_flight();
  // returns number 0 when nothing is pending.
  Batch TakeBatch();
  // The batch in flight is durable: appends the held entries it released to
  // `outbox` and returns the callbacks that waited for it (run them without
  // the caller's lock).
  std::vector<std::function<void()>> Committed(Outbox& outbox);
  // The batch in flight was not written: it goes back in front of the pending
  // changes and the held entries keep waiting.
  void Failed(Batch batch);

  // Runs `fn` once batch `mark` is committed. Returns false (and does not keep
  // `fn`) when it already is: the caller runs it.
  bool WhenDurable(uint64_t mark, std::function<void()> fn);

 private:
  struct Held {
    uint64_t batch;
    Outbox outbox;
  };

  std::vector<JobChanges> pending_;
  uint64_t next_ = 1;       // number of the next batch taken
  uint64_t in_flight_ = 0;  // 0: none
  uint64_t committed_ = 0;
  std::deque<Held> held_;
  size_t held_messages_ = 0;
  std::deque<std::pair<uint64_t, std::function<void()>>> waiters_;
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_WRITE_BEHIND_QUEUE_H_
