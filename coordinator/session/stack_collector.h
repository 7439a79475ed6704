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
// At a declared hang every agent sends its workers' stacks on its own
// (Stacks with request_id 0, session.proto StopWorkers.take_stacks), taken
// before its workers stop: they are kept per job, for the newest generation
// that hung (a later generation's replace them), in memory only, for the
// newest Options::max_jobs_with_hang_stacks jobs (LastHangStacks).
//
// Thread-safety: thread-safe. `done` and SendRequest run without the lock
// held (done on the thread that completed the collection: an agent's
// session, the collector's "stack-deadline" thread, or Collect's caller
// when every node is unreachable).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
    // Jobs whose last hang's stacks are kept (the oldest hang dropped first),
    // and the workers kept per node in them.
    int max_jobs_with_hang_stacks = 256;
    int max_workers_per_node = 1024;
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

  // An agent's Stacks (the session's job, node and incarnation): an answer,
  // or with request_id 0 its stacks at a declared hang.
  void OnStacks(const std::string& job_id, const std::string& node_id, uint64_t incarnation,
                const v1::Stacks& stacks);

  // The stacks the nodes sent when the job's last hang was declared, ranks
  // grouped as Collect's answers (the nodes that sent none are not known
  // here: missing_nodes is empty). Possible errors: NOT_FOUND (no hang's
  // stacks kept for the job).
  absl::StatusOr<v1::JobStacks> LastHangStacks(const std::string& job_id) const;

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

  // The stacks the nodes of one job sent at its last hang.
  struct HangStacks {
    int64_t generation = 0;
    absl::Time taken;  // the first node's
    std::map<std::string, std::vector<v1::WorkerStack>> by_node;
  };

  // The answer of a finished collection.
  v1::JobStacks Assemble(const Pending& pending) const;
  void KeepHangStacksLocked(const std::string& job_id, const std::string& node_id,
                            const v1::Stacks& stacks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker's stack as kept: cut to the limits.
  v1::WorkerStack Kept(const v1::WorkerStack& w) const;
  bool CompleteLocked(const Pending& pending) const;
  void DeadlineLoop();

  const Options options_;
  const Clock& clock_;
  const SendRequest send_;

  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, HangStacks> hang_stacks_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread deadline_thread_;
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_STACK_COLLECTOR_H_
