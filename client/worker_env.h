#ifndef DDP_CLIENT_WORKER_ENV_H_
#define DDP_CLIENT_WORKER_ENV_H_

// The environment of one worker: torchrun's contract plus this product's DDP_*
// variables.
//
//   RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE
//   ROLE_RANK ROLE_WORLD_SIZE ROLE_NAME MASTER_ADDR MASTER_PORT
//   TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS TORCHELASTIC_RUN_ID
//   TORCHELASTIC_ERROR_FILE TORCHELASTIC_USE_AGENT_STORE=False (rank 0 hosts
//   the TCPStore at MASTER_ADDR:PORT) TORCH_NCCL_ASYNC_ERROR_HANDLING=1 and
//   OMP_NUM_THREADS=1 (more than one worker) unless set DDP_COORDINATOR DDP_JOB
//   DDP_GENERATION DDP_HEARTBEAT_FILE DDP_NCCL_UNIQUE_ID (256 lowercase hex
//   chars; absent when the assignment carries no id)
//
// ROLE_RANK and ROLE_WORLD_SIZE count the workers of this node's --role across
// the generation (the coordinator computes them); RANK and WORLD_SIZE when the
// assignment does not know them.
// Thread-safety: pure functions.

#include <map>
#include <string>
#include <vector>

#include "client/worker_files.h"
#include "ddp/v1/session.pb.h"

namespace ddp::client {

using EnvMap = std::map<std::string, std::string>;

// What the worker environment needs besides the assignment (from
// LaunchOptions).
struct WorkerEnvContext {
  std::string job_id;
  std::string coordinator;
  std::string role = "default";
  int max_restarts = 0;
  int local_world_size = 1;
  // The agent's lease, published for the workers (worker_lease.h); empty:
  // none (DDP_LEASE_FILE unset).
  std::string lease_file;
  // The agent's bearer token (DDP_TOKEN), for workers that call the
  // coordinator; empty: none.
  std::string token;
  // DDP_PREEMPTION_NOTICE_FILE (client/preemption_notice.h); empty: none
  // (then DDP_PREEMPTION_READY_FILE is unset too).
  std::string preemption_notice_file;
};

// `base` (usually CurrentEnvironment()) overlaid with the worker's variables.
EnvMap BuildWorkerEnv(const v1::Assignment& assignment, const WorkerEnvContext& context,
                      int local_rank, const WorkerFiles& files, const EnvMap& base);

// True for the variables whose values change from one generation to the next
// (RANK, WORLD_SIZE, MASTER_ADDR/PORT, the restart count, the NCCL id, the
// generation's files, ...); everything else a worker gets is its rank's
// static environment (LOCAL_RANK, LOCAL_WORLD_SIZE, OMP_NUM_THREADS,
// CUDA_VISIBLE_DEVICES, the user's variables), which a --prewarm standby
// already has when it imports.
bool ChangesEveryGeneration(const std::string& key);

// `env` without the variables of ChangesEveryGeneration.
EnvMap StaticPart(const EnvMap& env);

// True for the static variables that differ between the local ranks of one
// node: LOCAL_RANK and DDP_RECOVERY_DIR (the agent's, client/agent). The rest
// of a rank's static environment is the node's, the same for every local
// rank (what a --prewarm zygote imports with, client/prewarm/).
bool DiffersByLocalRank(const std::string& key);

// `static_env` without the variables of DiffersByLocalRank.
EnvMap NodePart(const EnvMap& static_env);

// This process's environment.
EnvMap CurrentEnvironment();

// {"K=V", ...} for execve.
std::vector<std::string> ToEnvStrings(const EnvMap& env);

}  // namespace ddp::client

#endif  // DDP_CLIENT_WORKER_ENV_H_
