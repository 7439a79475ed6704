#ifndef DDP_COORDINATOR_RENDEZVOUS_GENERATION_MEMBERS_H_
#define DDP_COORDINATOR_RENDEZVOUS_GENERATION_MEMBERS_H_

// Who makes up a job's current generation (the TSL coordination service keeps
// a TaskState per task; a generation here is the group's): the node id at
// each group rank, the world size, how many members are still in it and how
// many finished, and each member's rank within its role. Plain value type;
// Job owns one and changes it under the registry's lock.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace ddp::rendezvous {

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

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_GENERATION_MEMBERS_H_
