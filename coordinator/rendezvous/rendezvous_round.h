#ifndef DDP_COORDINATOR_RENDEZVOUS_RENDEZVOUS_ROUND_H_
#define DDP_COORDINATOR_RENDEZVOUS_RENDEZVOUS_ROUND_H_

// One job's rendezvous rounds and the generation each forms: a round opens
// (WAITING), closes into a new generation with a fixed rank table (STARTING),
// takes group rank 0's master info and assigns every member its ranks
// (RUNNING). Owns the generation number, the members of the current (or last)
// generation, the master info and the round's deadlines (join, last call,
// master info). The job's state machine (job.h) says when each step happens.
//
// Closing: a round closes at once when max_nodes are registered; when
// min_nodes are, the last call starts and the round closes once it ran out
// (at once with a zero last_call_timeout). A round that has not closed by the
// join deadline fails the job. At close, at most max_nodes candidates become
// members (the caller orders them: Membership::CandidatesInOrder); rank
// requests are honoured when in range and uncontested (ComputeRankTable).
// Group rank 0 must send the master info within the master deadline.
//
// Thread-safety: not thread-safe; Job owns one and calls it under the
// registry's lock.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/rendezvous/job_settings.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/rendezvous/job_types.h"
#include "coordinator/rendezvous/rank_table.h"

namespace ddp::rendezvous {

// Who makes up a job's current generation (the TSL coordination service keeps
// a TaskState per task; a generation here is the group's): the node id at each
// group rank, the world size, how many members are still in it and how many
// finished, and each member's rank within its role.
struct GenerationMembers {
  // Node id by group rank ("" once the member is removed).
  std::vector<std::string> by_rank;
  int64_t world_size = 0;  // workers of the generation (kept after it ends)
  int live = 0;            // ranks still held
  int succeeded = 0;       // members whose workers all exited 0
  // (role rank offset, role world size) by node id; empty when not known
  // (restored, not recomputed).
  absl::flat_hash_map<std::string, std::pair<int64_t, int64_t>> role_ranks;

  // A new generation of `ranks` group ranks and `workers` processes; the
  // caller places the members (by_rank[rank] = node id).
  void Form(size_t ranks, int64_t workers) {
    by_rank.assign(ranks, "");
    world_size = workers;
    live = static_cast<int>(ranks);
    succeeded = 0;
  }
  // No generation runs (a rendezvous is open). The world size stays: it is
  // the last generation's, which the job reports.
  void Clear() {
    by_rank.clear();
    live = 0;
    succeeded = 0;
  }
  // `node_id` holds `rank`.
  bool Holds(int rank, const std::string& node_id) const {
    return rank >= 0 && rank < static_cast<int>(by_rank.size()) && by_rank[rank] == node_id;
  }
  // The member at `rank` left the generation.
  void Remove(int rank) {
    by_rank[rank].clear();
    --live;
  }
};

// A member's workers' role and process count (for role ranks); role "" when
// not known (restored, not resumed yet).
struct MemberRole {
  std::string node_id;
  std::string role;
  int nproc = 0;
};

class RendezvousRound {
 public:
  // As stored (JobRecord): the generation and its master info. No members
  // (RestoreMembers adds them).
  RendezvousRound(Generation generation, MasterInfo master);

  Generation generation() const { return generation_; }
  const GenerationMembers& members() const { return members_; }
  GenerationMembers& mutable_members() { return members_; }
  const MasterInfo& master() const { return master_; }

  // Rebuilds the members of a generation that was forming, running or
  // stopping from the stored group ranks, (node id, group rank) of every node,
  // and its world size. Possible errors: DATA_LOSS (two nodes hold one rank).
  absl::Status RestoreMembers(const std::vector<std::pair<std::string, int>>& ranks,
                              int64_t world_size, const std::string& job_id);

  // A round opens: no generation runs; it must close by `join_deadline`.
  void Open(absl::Time join_deadline);
  // `registered` nodes are in an open round at `now`: true when it closes now
  // (max_nodes reached, or min_nodes with no last call). Starts the last call
  // when min_nodes are first reached.
  bool ReadyToClose(int registered, const JobSettings& settings, absl::Time now);
  // Fewer than min_nodes are registered again: the last call is off.
  void MinNoLongerReached() { min_reached_at_.reset(); }
  bool LastCallOver(absl::Time now, absl::Duration last_call_timeout) const {
    return min_reached_at_ && now >= *min_reached_at_ + last_call_timeout;
  }
  bool JoinTimedOut(absl::Time now) const { return now >= join_deadline_; }

  // The round closes with `members` (group rank order of preference): a new
  // generation, its rank table, master info awaited until `master_deadline`.
  // Possible errors: those of ComputeRankTable (inputs are validated on
  // entry, so any is a bug); nothing changes then.
  absl::StatusOr<RankTable> Close(const std::vector<RankMember>& members,
                                  absl::Time master_deadline);
  // No master info is awaited any more (the generation is stopped).
  void StopAwaitingMaster() { master_deadline_ = absl::InfiniteFuture(); }
  // Master info awaited since a restore: until `deadline`.
  void AwaitMasterUntil(absl::Time deadline) { master_deadline_ = deadline; }
  bool MasterInfoOverdue(absl::Time now) const { return now >= master_deadline_; }
  // The master info group rank 0 (`node_id`, registered with
  // `registered_address`) sent, with the registered address when it gave none.
  // Possible errors: INVALID_ARGUMENT (port outside [1, 65535], NCCL id neither
  // empty nor kNcclUniqueIdBytes, address too long, no address at all).
  static absl::StatusOr<MasterInfo> EffectiveMasterInfo(const MasterInfo& info,
                                                        const std::string& node_id,
                                                        const std::string& registered_address,
                                                        int max_address_length);
  // Group rank 0 answered: the generation runs with `master`; `roles` of the
  // members in group-rank order give the role ranks.
  void Start(MasterInfo master, const std::vector<MemberRole>& roles);
  // The assignment of the member `record` in the running generation.
  Assignment AssignmentFor(const NodeRecord& record, int restart_count, int max_restarts) const;

  // The job finished: no deadline runs.
  void Finish();
  // The coordinator stalled for `gap`: every deadline moves that much later.
  void Postpone(absl::Duration gap);

 private:
  void ComputeRoleRanks(const std::vector<MemberRole>& roles);

  Generation generation_ = 0;
  GenerationMembers members_;
  MasterInfo master_;
  absl::Time join_deadline_ = absl::InfiniteFuture();
  std::optional<absl::Time> min_reached_at_;
  absl::Time master_deadline_ = absl::InfiniteFuture();
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_RENDEZVOUS_ROUND_H_
