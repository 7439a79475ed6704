#ifndef DDP_CLIENT_ASSIGNMENT_H_
#define DDP_CLIENT_ASSIGNMENT_H_

// What the coordinator tells one node for one generation: its place in the rank
// table and where rank 0 listens. The session layer fills it from the
// coordinator's message; the worker environment (worker_env.h) is derived from
// it. A plain value.

#include <cstdint>
#include <string>

namespace ddp::client {

struct Assignment {
  int64_t generation = 0;      // job-wide, monotonic (DDP_GENERATION)
  int restart_count = 0;       // group restarts so far (TORCHELASTIC_RESTART_COUNT)
  int group_rank = 0;          // this node's rank among nodes (GROUP_RANK)
  int group_world_size = 1;    // nodes in the generation (GROUP_WORLD_SIZE)
  int global_rank_offset = 0;  // global rank of this node's local rank 0
  int world_size = 1;          // workers in the generation, all nodes (WORLD_SIZE)
  std::string master_addr;     // group-rank-0 node's address
  int master_port = 0;         // free port found there
  std::string nccl_unique_id;  // 128 raw bytes, or empty when NCCL is not in use
  // Ranks among the generation's workers of this node's --role
  // (ROLE_RANK = offset + local rank); role_world_size 0: not known, use
  // RANK and WORLD_SIZE.
  int64_t role_rank_offset = 0;
  int64_t role_world_size = 0;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_ASSIGNMENT_H_
