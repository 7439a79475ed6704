#ifndef DDP_COORDINATOR_RPC_STREAM_QUEUE_PLACEMENT_H_
#define DDP_COORDINATOR_RPC_STREAM_QUEUE_PLACEMENT_H_

// Which completion queue the next call of a server stream goes to
// (AsyncStreamQueues: agents' sessions, KV watches).
//
// Each operation of Debian's libgrpc 1.51 (a build without NDEBUG) scans its
// completion queue's list of outstanding operations, at least one per open
// stream (a session's pending read, a watch's notice of its end): a message
// costs O(streams on its queue). A fixed number of queues
// makes that grow with the job (4 queues: 16,384 streams each at 65,536
// agents, and a restart cost 2.5x per agent what it did at 16,384;
// docs/benchmarks.md). So queues open as streams come: `min_queues` to start
// with, twice as many whenever the open ones are full (`streams_per_queue`
// streams plus `accepts_per_queue` requested accepts each; the new half then
// takes the newcomers side by side, not one queue's thread alone), at most
// `max_queues`; no queue takes more while another open one has room.
//
// A new call stays on the queue that asks for it (the one whose accept was
// just used) while that queue has room: gRPC hands a connection's new streams
// to the accepts of its own queue first, so the streams of one connection
// (agents behind a proxy, rdzv_sim's shared connections, a client's watches) stay together and
// one read of that connection completes on one thread. Otherwise it goes to the
// open queue with the fewest calls.
//
//   StreamQueuePlacement placement({.min_queues = 4, .streams_per_queue = 2048,
//                                    .max_queues = 64});
//   int queue = placement.Add(asking);   // a call requested on `queue`
//   ...
//   placement.Remove(queue);       // that call ended (or was never used)
//
// A "call" is a requested accept or an open stream: the accept becomes the
// stream, so the count does not change when one is accepted.
//
// Thread-safety: thread-safe.

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ddp::rpc {

struct StreamQueuePlacementOptions {
  int min_queues = 4;            // open from the start; >= 1
  int streams_per_queue = 2048;  // streams per open queue before more open; 0: never
  int max_queues = 64;           // >= min_queues (raised to it otherwise)
  // Requested accepts a queue holds beside its streams (a queue is full at
  // streams_per_queue + accepts_per_queue calls), so that exactly 16,384
  // agents fit 8 queues of 2,048.
  int accepts_per_queue = 0;
};

class StreamQueuePlacement {
 public:
  explicit StreamQueuePlacement(StreamQueuePlacementOptions options);

  // The most queues that can ever open: how many the server must create.
  int max_queues() const { return max_queues_; }

  // How many queues are open while `calls` calls are placed: the smallest
  // min_queues * 2^k (at most max_queues) that holds them at
  // streams_per_queue + accepts_per_queue each.
  int OpenQueues(int64_t calls) const;

  // Places one more call: on `preferred` when it is open (counting this call)
  // and not full (always when streams_per_queue is 0),
  // else on the open queue with the fewest calls, the lowest index on a tie.
  // Returns its index. `preferred` -1: none.
  int Add(int preferred = -1);

  // A call placed on `queue` ended. An index out of range or a queue with no
  // call is a programming error (ignored).
  void Remove(int queue);

  // Calls placed on `queue` now (0 for an index out of range).
  int64_t calls(int queue) const;
  int64_t total_calls() const;

 private:
  const int min_queues_;
  const int streams_per_queue_;
  const int64_t calls_per_queue_;  // full: streams_per_queue + accepts_per_queue
  const int max_queues_;
  mutable absl::Mutex mu_;
  std::vector<int64_t> calls_ ABSL_GUARDED_BY(mu_);
  int64_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ddp::rpc

#endif  // DDP_COORDINATOR_RPC_STREAM_QUEUE_PLACEMENT_H_
