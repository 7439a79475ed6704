#include "client/worker_env.h"

#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace ddp::client {

EnvMap BuildWorkerEnv(const v1::Assignment& a, const WorkerEnvContext& c, int local_rank,
                      const WorkerFiles& files, const EnvMap& base) {
  EnvMap env = base;
  const int rank = a.global_rank_offset() + local_rank;
  env["RANK"] = absl::StrCat(rank);
  env["LOCAL_RANK"] = absl::StrCat(local_rank);
  env["WORLD_SIZE"] = absl::StrCat(a.world_size());
  env["LOCAL_WORLD_SIZE"] = absl::StrCat(c.local_world_size);
  env["GROUP_RANK"] = absl::StrCat(a.group_rank());
  env["GROUP_WORLD_SIZE"] = absl::StrCat(a.group_world_size());
  // torchrun counts ROLE_RANK among the workers of the same --role.
  const bool role_known = a.role_world_size() > 0;
  env["ROLE_RANK"] = absl::StrCat(role_known ? a.role_rank_offset() + local_rank : rank);
  env["ROLE_WORLD_SIZE"] = absl::StrCat(role_known ? a.role_world_size() : a.world_size());
  env["ROLE_NAME"] = c.role;
  env["MASTER_ADDR"] = a.master_addr();
  env["MASTER_PORT"] = absl::StrCat(a.master_port());
  env["TORCHELASTIC_RESTART_COUNT"] = absl::StrCat(a.restart_count());
  env["TORCHELASTIC_MAX_RESTARTS"] = absl::StrCat(c.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = c.job_id;
  env["TORCHELASTIC_ERROR_FILE"] = files.error_file;
  // No agent-side store here: rank 0's init_process_group must create the
  // TCPStore.
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  // torchrun's default, unless set; torch before 2.2 reads only the older
  // name, so both carry the same value.
  env.emplace("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  env.emplace("NCCL_ASYNC_ERROR_HANDLING", env["TORCH_NCCL_ASYNC_ERROR_HANDLING"]);
  if (c.local_world_size > 1) env.emplace("OMP_NUM_THREADS", "1");
  env["DDP_COORDINATOR"] = c.coordinator;
  env["DDP_JOB"] = c.job_id;
  env["DDP_GENERATION"] = absl::StrCat(a.generation());
  env["DDP_HEARTBEAT_FILE"] = files.heartbeat_file;
  env["DDP_PROGRESS_FILE"] = files.progress_file;
  env["DDP_STACK_DUMP_FILE"] = files.stack_dump_file;
  if (!c.token.empty()) env["DDP_TOKEN"] = c.token;
  if (c.preemption_notice_file.empty()) {
    env.erase("DDP_PREEMPTION_NOTICE_FILE");
    env.erase("DDP_PREEMPTION_READY_FILE");
  } else {
    env["DDP_PREEMPTION_NOTICE_FILE"] = c.preemption_notice_file;
    env["DDP_PREEMPTION_READY_FILE"] = files.ready_to_leave_file;
  }
  if (c.lease_file.empty()) {
    env.erase("DDP_LEASE_FILE");
  } else {
    env["DDP_LEASE_FILE"] = c.lease_file;
  }
  if (a.nccl_unique_id().empty()) {
    env.erase("DDP_NCCL_UNIQUE_ID");
  } else {
    env["DDP_NCCL_UNIQUE_ID"] = absl::BytesToHexString(a.nccl_unique_id());
  }
  return env;
}

bool ChangesEveryGeneration(const std::string& key) {
  static const auto* const kGenerationVariables =
      new std::set<std::string>{"RANK",
                                "WORLD_SIZE",
                                "GROUP_RANK",
                                "GROUP_WORLD_SIZE",
                                "ROLE_RANK",
                                "ROLE_WORLD_SIZE",
                                "MASTER_ADDR",
                                "MASTER_PORT",
                                "DDP_GENERATION",
                                "DDP_HEARTBEAT_FILE",
                                "DDP_PROGRESS_FILE",
                                "DDP_STACK_DUMP_FILE",
                                "DDP_PREEMPTION_READY_FILE",
                                "DDP_NCCL_UNIQUE_ID",
                                "TORCHELASTIC_RESTART_COUNT",
                                "TORCHELASTIC_ERROR_FILE"};
  return kGenerationVariables->count(key) > 0;
}

EnvMap StaticPart(const EnvMap& env) {
  EnvMap part;
  for (const auto& [key, value] : env) {
    if (!ChangesEveryGeneration(key)) part.emplace(key, value);
  }
  return part;
}

bool DiffersByLocalRank(const std::string& key) {
  return key == "LOCAL_RANK" || key == "DDP_RECOVERY_DIR";
}

EnvMap NodePart(const EnvMap& static_env) {
  EnvMap part;
  for (const auto& [key, value] : static_env) {
    if (!DiffersByLocalRank(key)) part.emplace(key, value);
  }
  return part;
}

EnvMap CurrentEnvironment() {
  EnvMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string item(*entry);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.emplace(item.substr(0, eq), item.substr(eq + 1));
  }
  return env;
}

std::vector<std::string> ToEnvStrings(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [key, value] : env) out.push_back(absl::StrCat(key, "=", value));
  return out;
}

}  // namespace ddp::client
