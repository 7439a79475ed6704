#ifndef DDP_COORDINATOR_SESSION_STACK_COLLECTOR_H_
#define DDP_COORDINATOR_SESSION_STACK_COLLECTOR_H_

// Gathers the Python stacks of a job's workers from the agents of its member
// nodes (GetJobStacks, `ddpctl jobs stacks JOB`):
//
//   Collect(job, generation, nodes, timeout, done)
//       --> RequestStacks{id} to every node's session (SendRequest)
//   OnStacks(node, Stacks{id}) from each agent   --> kept
//   every node answered, or the timeout passed   --> done(JobStacks)
//
// The answer lists every rank of the generation: the ranks of a node that did
// not answer (or has no session) carry an error and the node is named in
// missing_nodes; ranks are grouped by identical stack (common/stack_groups.h),
// the smallest group first, so the rank that is elsewhere stands out.
//
// Agents' answers are checked before they are kept: a rank outside the node's
// range is dropped, stacks are cut to Options::max_stack_bytes, and answers
// to unknown (finished) requests are ignored.
//
// Thread-safety: thread-safe. `done` and SendRequest run without the lock
// held (done on the thread that completed the collection: an agent's
// session, the collector's "stack-deadline" thread, or Collect's caller
// when every node is unreachable).

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "ddp/v1/jobs.pb.h"
#include "ddp/v1/session.pb.h"

namespace ddp::session {

class StackCollector {
 public:
  struct Options {
    absl::Duration default_timeout = absl::Seconds(5);
    absl::Duration max_timeout = absl::Seconds(60);
    // Collections under way at once, all jobs together.
    int max_pending = 16;
    size_t max_stack_bytes = 64 << 10;  // per rank
  };
  // A member node of the generation: its ranks are
  // [global_rank_offset, global_rank_offset + nproc).
  struct Node {
    std::string node_id;
    uint64_t incarnation = 0;
    int64_t global_rank_offset = 0;
    int nproc = 0;
  };
  // Sends RequestStacks{request_id} to the node's session; false when it has
  // none.
  using SendRequest =
      std::function<bool(const std::string& job_id, const Node& node, uint64_t request_id)>;
  using Done = std::function<void(v1::JobStacks)>;

  StackCollector(Options options, const Clock& clock, SendRequest send);
  // Shutdown().
  ~StackCollector();
  StackCollector(const StackCollector&) = delete;
  StackCollector& operator=(const StackCollector&) = delete;

  // Starts a collection; `done` runs exactly once when it is OK.
  // `timeout` zero: Options::default_timeout.
  // Possible errors: INVALID_ARGUMENT (timeout negative or over max_timeout,
  // both named), RESOURCE_EXHAUSTED (max_pending collections under way),
  // UNAVAILABLE (after Shutdown).
  absl::Status Collect(const std::string& job_id, int64_t generation, std::vector<Node> nodes,
                       absl::Duration timeout, Done done);

  // An agent's Stacks (the session's job, node and incarnation).
  void OnStacks(const std::string& job_id, const std::string& node_id, uint64_t incarnation,
                const v1::Stacks& stacks);

  // Completes the collections under way with what they have, stops the
  // thread; later Collect calls fail with UNAVAILABLE. Idempotent.
  void Shutdown();

  // Completes the collections whose timeout passed on the clock. The
  // collector's thread calls it at each deadline; a test with a FakeClock
  // calls it after advancing the clock.
  void ExpireDue();

 private:
  struct NodeAnswer {
    Node node;
    bool reachable = true;
    bool answered = false;
    std::vector<v1::WorkerStack> workers;
  };
  struct Pending {
    std::string job_id;
    int64_t generation = 0;
    absl::Time deadline;
    absl::Duration timeout;
    std::vector<NodeAnswer> nodes;
    Done done;
  };

  // The answer of a finished collection.
  v1::JobStacks Assemble(const Pending& pending) const;
  bool CompleteLocked(const Pending& pending) const;
  void DeadlineLoop();

  const Options options_;
  const Clock& clock_;
  const SendRequest send_;

  absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread deadline_thread_;
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_STACK_COLLECTOR_H_
