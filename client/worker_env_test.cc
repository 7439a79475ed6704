#include "client/worker_env.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "client/worker_files.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

v1::Assignment TwoNodeAssignment() {
  v1::Assignment a;
  a.set_generation(7);
  a.set_restart_count(2);
  a.set_group_rank(1);
  a.set_group_world_size(2);
  a.set_global_rank_offset(4);
  a.set_world_size(8);
  a.set_master_addr("10.0.0.1");
  a.set_master_port(29501);
  a.set_nccl_unique_id(std::string(128, '\x01'));
  return a;
}

WorkerEnvContext Context(int local_world_size) {
  WorkerEnvContext c;
  c.job_id = "job1";
  c.coordinator = "coord:29400";
  c.role = "trainer";
  c.max_restarts = 3;
  c.local_world_size = local_world_size;
  return c;
}

TEST(BuildWorkerEnvTest, Build_RoleRanksKnown_CountedPerRole) {
  v1::Assignment a = TwoNodeAssignment();
  a.set_role_rank_offset(2);
  a.set_role_world_size(6);
  EnvMap env = BuildWorkerEnv(a, Context(4), 1, WorkerFilesFor("/logs/run", 7, 1), {});
  EXPECT_EQ(env["ROLE_RANK"], "3");
  EXPECT_EQ(env["ROLE_WORLD_SIZE"], "6");
  EXPECT_EQ(env["RANK"], "5");
}

TEST(BuildWorkerEnvTest, Build_UserNcclErrorHandling_BothNamesCarryIt) {
  EnvMap env = BuildWorkerEnv(TwoNodeAssignment(), Context(4), 0, WorkerFilesFor("/logs/run", 7, 0),
                              {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}});
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "0");
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "0");
}

TEST(BuildWorkerEnvTest, Build_SecondNode_TorchrunContract) {
  const WorkerFiles files = WorkerFilesFor("/logs/run", 7, 2);
  EnvMap env = BuildWorkerEnv(TwoNodeAssignment(), Context(4), 2, files, {{"PATH", "/bin"}});
  const EnvMap expected_subset = {
      {"RANK", "6"},
      {"LOCAL_RANK", "2"},
      {"WORLD_SIZE", "8"},
      {"LOCAL_WORLD_SIZE", "4"},
      {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "2"},
      {"ROLE_RANK", "6"},
      {"ROLE_WORLD_SIZE", "8"},
      {"ROLE_NAME", "trainer"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29501"},
      {"TORCHELASTIC_RESTART_COUNT", "2"},
      {"TORCHELASTIC_MAX_RESTARTS", "3"},
      {"TORCHELASTIC_RUN_ID", "job1"},
      {"TORCHELASTIC_ERROR_FILE", "/logs/run/attempt_6/2/error.json"},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"OMP_NUM_THREADS", "1"},
      {"DDP_COORDINATOR", "coord:29400"},
      {"DDP_JOB", "job1"},
      {"DDP_GENERATION", "7"},
      {"DDP_HEARTBEAT_FILE", "/logs/run/attempt_6/2/heartbeat"},
      {"DDP_PROGRESS_FILE", "/logs/run/attempt_6/2/progress.json"},
      {"DDP_STACK_DUMP_FILE", "/logs/run/attempt_6/2/stacks"},
      {"PATH", "/bin"},
  };
  for (const auto& [key, value] : expected_subset) {
    ASSERT_TRUE(env.count(key)) << key;
    EXPECT_EQ(env[key], value) << key;
  }
  std::string hex;
  for (int i = 0; i < 128; ++i) hex += "01";
  EXPECT_EQ(env["DDP_NCCL_UNIQUE_ID"], hex);
  EXPECT_EQ(env["DDP_NCCL_UNIQUE_ID"].size(), 256u);
}

TEST(BuildWorkerEnvTest, Build_OmpAlreadySet_KeepsUserValue) {
  EnvMap env = BuildWorkerEnv(TwoNodeAssignment(), Context(4), 0, WorkerFilesFor("/r", 1, 0),
                              {{"OMP_NUM_THREADS", "8"}});
  EXPECT_EQ(env["OMP_NUM_THREADS"], "8");
}

TEST(BuildWorkerEnvTest, Build_SingleWorker_NoOmpOverride) {
  EnvMap env = BuildWorkerEnv(TwoNodeAssignment(), Context(1), 0, WorkerFilesFor("/r", 1, 0), {});
  EXPECT_EQ(env.count("OMP_NUM_THREADS"), 0u);
}

TEST(BuildWorkerEnvTest, Build_NoNcclId_VariableAbsentEvenIfInherited) {
  v1::Assignment a = TwoNodeAssignment();
  a.clear_nccl_unique_id();
  EnvMap env = BuildWorkerEnv(a, Context(2), 0, WorkerFilesFor("/r", 1, 0),
                              {{"DDP_NCCL_UNIQUE_ID", "stale"}});
  EXPECT_EQ(env.count("DDP_NCCL_UNIQUE_ID"), 0u);
}

TEST(BuildWorkerEnvTest, Build_InheritedTorchVars_Overwritten) {
  EnvMap env = BuildWorkerEnv(TwoNodeAssignment(), Context(2), 1, WorkerFilesFor("/r", 1, 1),
                              {{"RANK", "99"}, {"WORLD_SIZE", "99"}});
  EXPECT_EQ(env["RANK"], "5");
  EXPECT_EQ(env["WORLD_SIZE"], "8");
}

TEST(StaticPartTest, TwoGenerations_EveryDifferenceIsAGenerationVariable) {
  v1::Assignment later = TwoNodeAssignment();
  later.set_generation(8);
  later.set_restart_count(3);
  later.set_group_rank(0);
  later.set_group_world_size(3);
  later.set_global_rank_offset(0);
  later.set_world_size(12);
  later.set_role_rank_offset(2);
  later.set_role_world_size(6);
  later.set_master_addr("10.0.0.2");
  later.set_master_port(29502);
  later.set_nccl_unique_id(std::string(128, '\x02'));
  const EnvMap base = {{"PATH", "/bin"}, {"CUDA_VISIBLE_DEVICES", "1"}};
  const EnvMap first =
      BuildWorkerEnv(TwoNodeAssignment(), Context(2), 1, WorkerFilesFor("/r", 7, 1), base);
  const EnvMap second = BuildWorkerEnv(later, Context(2), 1, WorkerFilesFor("/r", 8, 1), base);
  for (const auto& [key, value] : first) {
    if (second.at(key) != value) EXPECT_TRUE(ChangesEveryGeneration(key)) << key;
  }
  EXPECT_EQ(StaticPart(first), StaticPart(second));
  const EnvMap part = StaticPart(first);
  EXPECT_EQ(part.at("LOCAL_RANK"), "1");
  EXPECT_EQ(part.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(part.at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(part.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(part.count("RANK"), 0u);
  EXPECT_EQ(part.count("DDP_NCCL_UNIQUE_ID"), 0u);
  EXPECT_EQ(part.count("TORCHELASTIC_ERROR_FILE"), 0u);
}

TEST(NodePartTest, TwoLocalRanks_EveryDifferenceDiffersByLocalRank) {
  const EnvMap base = {{"PATH", "/bin"}, {"CUDA_VISIBLE_DEVICES", "0,1"}};
  EnvMap first = StaticPart(
      BuildWorkerEnv(TwoNodeAssignment(), Context(2), 0, WorkerFilesFor("/r", 1, 0), base));
  EnvMap second = StaticPart(
      BuildWorkerEnv(TwoNodeAssignment(), Context(2), 1, WorkerFilesFor("/r", 1, 1), base));
  first["DDP_RECOVERY_DIR"] = "/run/recovery/0";  // as the agent sets it per slot
  second["DDP_RECOVERY_DIR"] = "/run/recovery/1";
  for (const auto& [key, value] : first) {
    if (second.at(key) != value) EXPECT_TRUE(DiffersByLocalRank(key)) << key;
  }
  EXPECT_EQ(NodePart(first), NodePart(second));
  EXPECT_EQ(NodePart(first).count("LOCAL_RANK"), 0u);
  EXPECT_EQ(NodePart(first).at("CUDA_VISIBLE_DEVICES"), "0,1");
}

TEST(EnvHelpersTest, ToEnvStrings_And_CurrentEnvironment_RoundTrip) {
  EXPECT_EQ(ToEnvStrings({{"A", "1"}, {"B", "x=y"}}), (std::vector<std::string>{"A=1", "B=x=y"}));
  setenv("DDP_WORKER_ENV_TEST", "v=1", 1);
  EXPECT_EQ(CurrentEnvironment()["DDP_WORKER_ENV_TEST"], "v=1");
}

TEST(WorkerFilesTest, WorkerFilesFor_Layout_TorchrunLike) {
  WorkerFiles f = WorkerFilesFor("/base/job_x", 3, 1);  // generation 3
  EXPECT_EQ(f.dir, "/base/job_x/attempt_2/1");
  EXPECT_EQ(f.stdout_log, "/base/job_x/attempt_2/1/stdout.log");
  EXPECT_EQ(f.stderr_log, "/base/job_x/attempt_2/1/stderr.log");
  EXPECT_EQ(f.error_file, "/base/job_x/attempt_2/1/error.json");
  EXPECT_EQ(f.heartbeat_file, "/base/job_x/attempt_2/1/heartbeat");
  EXPECT_EQ(WorkerFilesFor("/b", 1, 0).dir, "/b/attempt_0/0");  // the first: attempt_0
}

TEST(WorkerFilesTest, MakeRunDirectory_UnderLogDir_CreatesUniqueDirectories) {
  const std::string base = std::string(getenv("TEST_TMPDIR")) + "/logs/nested";
  auto first = MakeRunDirectory(base, "jobA");
  auto second = MakeRunDirectory(base, "jobA");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(*first, *second);
  EXPECT_EQ(first->rfind(base + "/jobA_", 0), 0u) << *first;
  struct stat st;
  EXPECT_EQ(stat(first->c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST(WorkerFilesTest, MakeRunDirectory_NoLogDir_UsesTemporaryDirectory) {
  auto dir = MakeRunDirectory("", "jobB");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_NE(dir->find("/ddp_jobB_"), std::string::npos) << *dir;
}

TEST(WorkerFilesTest, MakeDirectories_UnderAFile_InternalErrorNamingPath) {
  const std::string file = std::string(getenv("TEST_TMPDIR")) + "/plainfile";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  absl::Status s = MakeDirectories(file + "/sub");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("plainfile"), std::string::npos) << s;
}

}  // namespace
}  // namespace ddp::client
