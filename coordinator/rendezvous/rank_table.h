#ifndef DDP_COORDINATOR_RENDEZVOUS_RANK_TABLE_H_
#define DDP_COORDINATOR_RENDEZVOUS_RANK_TABLE_H_

// The rank table of one generation: every member node gets a group rank 0..n-1
// and a contiguous block of global ranks starting at the prefix sum of the
// process counts of the nodes before it (so nodes may run different process
// counts).
//
// Assignment rules, in priority order:
//   1. Requested ranks (torch.distributed.launch's --node-rank) are honoured
//      when consistent: in [0, n) and requested by exactly one member.
//      Inconsistent requests are ignored and listed in ignored_requests.
//   2. Sticky ranks: a member keeps its previous group rank when it is < n
//      and not taken by a request. So group rank 0 stays on its node unless
//      that node left (or another node explicitly requested rank 0).
//   3. The remaining members fill the free ranks in ascending order:
//      previous members first (by previous rank), then new nodes in input
//      order (join order).
//
// Cost: O(n) time and memory. Pure function; thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddp::rendezvous {

struct RankMember {
  std::string node_id;
  int nproc = 1;                 // local world size, >= 1
  int requested_rank = -1;       // -1: no request
  int previous_group_rank = -1;  // -1: not in the previous generation
};

struct RankEntry {
  std::string node_id;
  int group_rank = 0;
  int nproc = 1;
  int64_t global_rank_offset = 0;  // RANK of local rank 0 on this node
};

struct RankTable {
  std::vector<RankEntry> entries;  // indexed by group rank
  int64_t world_size = 0;          // sum of nproc
  // Node ids whose requested rank was ignored (out of range or contested).
  std::vector<std::string> ignored_requests;
};

// Possible errors: INVALID_ARGUMENT for an empty member list, a duplicate node
// id or a process count < 1.
absl::StatusOr<RankTable> ComputeRankTable(const std::vector<RankMember>& members);

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_RANK_TABLE_H_
