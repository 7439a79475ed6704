#ifndef DDP_COORDINATOR_RENDEZVOUS_MEMBERSHIP_H_
#define DDP_COORDINATOR_RENDEZVOUS_MEMBERSHIP_H_

// The nodes registered in one job: who each is (its stored NodeRecord), its
// agent's incarnation, whether the coordinator is in touch with it (liveness),
// the order the nodes joined, which node ids are excluded, and the fencing of
// inputs from agents that were replaced or removed. It knows nothing of the
// job's state machine: Job asks it and decides.
//
// Registration: every registered node is a candidate of the next rendezvous,
// previous members first (by their previous group rank), then by join order
// (CandidatesInOrder). A second registration with a new incarnation wins over
// an older agent whose stream is closed or that stopped heartbeating (an agent
// restart: Replace, the older is fenced). While the older is alive (Alive:
// stream open, heartbeats within two intervals) the newcomer is refused: two
// agents share a node id. Registering again with the same incarnation resumes
// the session (Resume) after a stream break or a coordinator restart.
//
// Liveness: a node is lost when it has neither heartbeated nor resumed for
// heartbeat_timeout (Silent). A running member is lost to the coordinator
// (LostSince) from the moment its stream closed, or once it has been silent for
// half its lease (by then its agent stops its workers if it is cut off).
//
// Fencing: every input after Register carries (job, node, incarnation,
// generation). An excluded node gets FAILED_PRECONDITION; an unknown node or
// an old incarnation gets ABORTED (stop the workers, register again); a
// generation other than the current one (exact) or above it gets ABORTED.
//
// Persistence: the nodes changed and removed since the last TakeChanges, and
// next_join_seq (a counter of JobCounters and JobRecord).
//
// Thread-safety: not thread-safe; Job owns one and calls it under the
// registry's lock.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/rendezvous/idle_hang.h"
#include "coordinator/rendezvous/job_settings.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/rendezvous/job_types.h"

namespace ddp::rendezvous {

class Membership {
 public:
  struct Node {
    NodeRecord record = NewNodeRecord("");
    bool connected = true;
    // When its session's stream was seen to close (not resumed since): the
    // agent died or was cut off. Not set for nodes that have not resumed
    // after a coordinator restart (their fate is unknown, not observed).
    std::optional<absl::Time> stream_closed_at;
    // --role of its workers, from its latest registration (not stored: after
    // a coordinator restart it is known again once the node resumes).
    std::string role;
    absl::Time last_heartbeat;
    // Current-generation progress of its workers.
    bool succeeded = false;
    int exited_ok = 0;
    std::vector<bool> exited;  // by local rank, allocated on first exit report
    // Its workers' latest progress reports (by local rank; only those that
    // reported), not stored.
    std::vector<WorkerProgress> progress;
    // The generation whose workers all said they are ready for an announced
    // drain (Job::ReadyToLeave); 0: none. Not stored.
    Generation ready_to_leave = 0;
    // Straggler exclusion policy (Job): since when one of its ranks has been
    // slower than the job's exclusion factor allows; unset: not now. Not stored.
    std::optional<absl::Time> slow_since;
    // Its workers' idleness in the current generation, from the heartbeats
    // that carried worker states (idle_hang.h). Not stored.
    NodeIdleness idleness;
  };

  struct Options {
    absl::Duration heartbeat_interval;
    absl::Duration heartbeat_timeout;
    absl::Duration lease;  // the agents' worker lease (LeaseFor)
    int max_excluded_nodes = 16384;
  };
  static Options OptionsFor(const JobSettings& settings, const RendezvousLimits& limits);

  // No nodes yet; `excluded` and `next_join_seq` as stored.
  Membership(std::string job_id, const Options& options, const Clock& clock,
             const std::vector<std::string>& excluded, uint64_t next_join_seq);

  // Adds the stored nodes (Job::Restore), disconnected, each with a full
  // heartbeat_timeout from now to resume. Possible errors: DATA_LOSS (a record
  // out of range).
  absl::Status Restore(const std::vector<NodeRecord>& records, const RendezvousLimits& limits);

  // A registration's fields are in range for a job of `max_nodes` and the
  // node is not excluded. Possible errors: INVALID_ARGUMENT (bad node id,
  // incarnation 0, nproc or requested rank out of range, address or role too
  // long), FAILED_PRECONDITION (excluded).
  absl::Status ValidateRegistration(const RegisterRequest& request, int max_nodes,
                                    const RendezvousLimits& limits) const;

  int size() const { return static_cast<int>(nodes_.size()); }
  Node* Find(const std::string& node_id);
  const Node* Find(const std::string& node_id) const;
  const absl::flat_hash_map<std::string, Node>& nodes() const { return nodes_; }

  // The node `ref` names, if it may act at `generation` (exact_generation:
  // only the current one; otherwise any up to it). Possible errors:
  // FAILED_PRECONDITION (excluded), ABORTED (unknown node, old incarnation,
  // stale generation).
  absl::StatusOr<Node*> Fence(const NodeRef& ref, Generation generation, bool exact_generation);

  // A new node, last in join order, heartbeating now.
  Node& Add(const RegisterRequest& request, int nproc);
  // A new agent (incarnation) of a registered node; the old one is fenced.
  void Replace(Node& node, const RegisterRequest& request, int nproc);
  // The same agent registered again (its session resumes).
  void Resume(Node& node, const RegisterRequest& request);
  void Heartbeat(Node& node);
  void StreamClosed(Node& node);
  // Removes a node for good.
  void Remove(const std::string& node_id);

  // The registered agent is alive: its stream is open and it heartbeated
  // within two intervals (a newcomer with the same id is a second agent).
  bool Alive(const Node& node) const;
  // See the header comment; nullopt while the node is in touch.
  std::optional<absl::Time> LostSince(const Node& node, absl::Time now) const;
  // The nodes silent for heartbeat_timeout at `now`. Amortized O(1) when none
  // is: the scan runs only once the earliest deadline seen by the previous
  // one passed (heartbeats only move deadlines later; Add lowers the bound).
  std::vector<std::string> Silent(absl::Time now);
  // The coordinator stalled: every node gets a full heartbeat_timeout from now.
  void ServingResumed(absl::Time now);

  // A new generation formed: no node's workers have exited in it yet.
  void ForgetGenerationProgress();

  // Every node: previous members by previous group rank, then the others by
  // join order.
  std::vector<Node*> CandidatesInOrder();

  bool IsExcluded(const std::string& node_id) const { return excluded_.contains(node_id); }
  // Returns false when it was excluded already. Possible errors:
  // RESOURCE_EXHAUSTED (max_excluded_nodes reached).
  absl::StatusOr<bool> Exclude(const std::string& node_id);
  std::vector<std::string> ExcludedSorted() const;

  uint64_t next_join_seq() const { return next_join_seq_; }
  void MarkDirty(const std::string& node_id) { dirty_nodes_.insert(node_id); }
  bool HasChanges() const { return !dirty_nodes_.empty() || !removed_nodes_.empty(); }
  // The nodes removed and changed since the last call, into `changes`.
  void TakeChanges(JobChanges& changes);
  void ForgetChanges();

 private:
  std::string job_id_;
  Options options_;
  const Clock* clock_;
  absl::flat_hash_map<std::string, Node> nodes_;
  absl::flat_hash_set<std::string> excluded_;
  uint64_t next_join_seq_ = 1;
  absl::Time next_liveness_check_ = absl::InfinitePast();
  absl::flat_hash_set<std::string> dirty_nodes_;
  std::vector<std::string> removed_nodes_;
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_MEMBERSHIP_H_
