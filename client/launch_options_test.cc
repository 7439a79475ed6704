#include "client/launch_options.h"

#include <map>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

HostInfo TestHost(int gpus = 0, std::map<std::string, std::string> env = {}) {
  HostInfo host;
  host.gpu_count = gpus;
  host.cpu_count = 8;
  host.hostname = "host-a";
  host.getenv = [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return host;
}

std::vector<std::string> Args(const std::string& line) {
  return absl::StrSplit(line, ' ', absl::SkipEmpty());
}

LaunchOptions ParseOk(const std::string& line, const HostInfo& host = TestHost()) {
  auto parsed = ParseLaunchOptions(Args(line), host);
  EXPECT_TRUE(parsed.ok()) << line << " -> " << parsed.status();
  return parsed.ok() ? *parsed : LaunchOptions();
}

TEST(ParseLaunchOptionsTest, Parse_OnlyEntryPoint_TorchrunDefaults) {
  LaunchOptions o = ParseOk("train.py");
  EXPECT_EQ(o.min_nodes, 1);
  EXPECT_EQ(o.max_nodes, 1);
  EXPECT_EQ(o.nproc_per_node, 1);
  EXPECT_EQ(o.max_restarts, 0);
  EXPECT_EQ(o.monitor_interval, absl::Milliseconds(100));
  // No id and one node: a fresh one, never torchrun's shared "none".
  EXPECT_EQ(o.job_id.rfind("run-", 0), 0u) << o.job_id;
  // One node and no coordinator named: a coordinator of its own, as
  // torchrun and torch.distributed.launch need nothing else started.
  EXPECT_TRUE(o.standalone);
  EXPECT_FALSE(o.coordinator_given);
  EXPECT_EQ(o.role, "default");
  EXPECT_EQ(o.node_id, "host-a");
  EXPECT_TRUE(o.use_env);
  EXPECT_FALSE(o.module || o.no_python || o.help);
  EXPECT_EQ(o.redirects.ToString(), "0");
  EXPECT_EQ(o.tee.ToString(), "0");
  EXPECT_EQ(o.python_exec, "python3");
  EXPECT_EQ(o.shutdown_timeout, absl::Seconds(30));
  EXPECT_EQ(o.entrypoint, "train.py");
  EXPECT_TRUE(o.script_args.empty());
  EXPECT_FALSE(o.node_rank.has_value());
}

// Each row: a command line and a check of one parsed field.
struct Row {
  std::string line;
  std::function<bool(const LaunchOptions&)> check;
  std::string what;
};

TEST(ParseLaunchOptionsTest, Parse_EverySpelling_SetsTheField) {
  const std::vector<Row> rows = {
      {"--nnodes 2 t.py", [](auto& o) { return o.min_nodes == 2 && o.max_nodes == 2; }, "N"},
      {"--nnodes=2:4 t.py", [](auto& o) { return o.min_nodes == 2 && o.max_nodes == 4; },
       "MIN:MAX"},
      {"--nproc-per-node 4 t.py", [](auto& o) { return o.nproc_per_node == 4; }, "dash"},
      {"--nproc_per_node=4 t.py", [](auto& o) { return o.nproc_per_node == 4; }, "underscore"},
      {"--nproc-per-node cpu t.py", [](auto& o) { return o.nproc_per_node == 8; }, "cpu"},
      {"--nproc-per-node auto t.py", [](auto& o) { return o.nproc_per_node == 8; },
       "auto without GPUs = CPU count"},
      {"--max-restarts 3 t.py", [](auto& o) { return o.max_restarts == 3; }, "restarts"},
      {"--max_restarts=3 t.py", [](auto& o) { return o.max_restarts == 3; }, "restarts_"},
      {"--monitor-interval 0.5 t.py",
       [](auto& o) { return o.monitor_interval == absl::Milliseconds(500); }, "interval"},
      {"--monitor_interval=2s t.py", [](auto& o) { return o.monitor_interval == absl::Seconds(2); },
       "interval dur"},
      {"--rdzv-id abc t.py", [](auto& o) { return o.job_id == "abc"; }, "rdzv-id"},
      {"--rdzv_id=abc t.py", [](auto& o) { return o.job_id == "abc"; }, "rdzv_id"},
      {"--job abc t.py", [](auto& o) { return o.job_id == "abc"; }, "job"},
      {"--rdzv-endpoint h:1 t.py", [](auto& o) { return o.coordinator == "h:1"; }, "endpoint"},
      {"--coordinator=[::1]:29400 t.py", [](auto& o) { return o.coordinator == "[::1]:29400"; },
       "coordinator ipv6"},
      {"--rdzv-conf join_timeout=60,last_call_timeout=5s t.py",
       [](auto& o) {
         return o.rdzv_conf.join_timeout == absl::Seconds(60) &&
                o.rdzv_conf.last_call_timeout == absl::Seconds(5);
       },
       "rdzv-conf"},
      {"--rdzv_conf=timeout=10,is_host=1 t.py",
       [](auto& o) {
         return o.rdzv_conf.join_timeout == absl::Seconds(10) && o.rdzv_conf.ignored.size() == 1 &&
                o.rdzv_conf.ignored[0].first == "is_host";
       },
       "timeout alias, ignored key"},
      {"--rdzv-conf shutdown_timeout=7 t.py",
       [](auto& o) { return o.shutdown_timeout == absl::Seconds(7); }, "conf shutdown"},
      {"--rdzv-backend c10d t.py",
       [](auto& o) { return o.rdzv_backend == "c10d" && o.notes.empty(); }, "backend"},
      {"--standalone t.py",
       [](auto& o) { return o.standalone && o.job_id.rfind("standalone-", 0) == 0; }, "standalone"},
      {"--role trainer t.py", [](auto& o) { return o.role == "trainer"; }, "role"},
      {"-m pkg.train", [](auto& o) { return o.module && o.entrypoint == "pkg.train"; }, "-m"},
      {"--module pkg.train", [](auto& o) { return o.module; }, "--module"},
      {"--no-python ./run", [](auto& o) { return o.no_python; }, "no-python"},
      {"--no_python ./run", [](auto& o) { return o.no_python; }, "no_python"},
      {"--use-env t.py", [](auto& o) { return o.use_env; }, "use-env"},
      {"--use_env=false t.py", [](auto& o) { return !o.use_env; }, "use_env=false"},
      {"--log-dir /tmp/x t.py", [](auto& o) { return o.log_dir == "/tmp/x"; }, "log-dir"},
      {"-r 3 t.py", [](auto& o) { return o.redirects.ForRank(5) == Std::kAll; }, "-r"},
      {"-r3 t.py", [](auto& o) { return o.redirects.ForRank(0) == Std::kAll; }, "-r3"},
      {"--redirects=0:1,1:2 t.py",
       [](auto& o) {
         return o.redirects.ForRank(0) == Std::kOut && o.redirects.ForRank(1) == Std::kErr;
       },
       "per rank"},
      {"-t 2 t.py", [](auto& o) { return o.tee.ForRank(0) == Std::kErr; }, "-t"},
      {"--tee=1 t.py", [](auto& o) { return o.tee.ForRank(0) == Std::kOut; }, "--tee"},
      {"--local-ranks-filter 0,2 t.py",
       [](auto& o) {
         return o.local_ranks_filter == std::set<int>{0, 2};
       },
       "filter"},
      {"--local_ranks_filter=1 t.py",
       [](auto& o) { return o.local_ranks_filter == std::set<int>{1}; }, "filter_"},
      {"--local-addr 10.0.0.5 t.py", [](auto& o) { return o.local_addr == "10.0.0.5"; }, "addr"},
      {"--node-rank 2 t.py", [](auto& o) { return o.node_rank == 2; }, "node-rank"},
      {"--node_rank=0 t.py", [](auto& o) { return o.node_rank == 0; }, "node_rank"},
      {"--node-id gpu-17 t.py", [](auto& o) { return o.node_id == "gpu-17"; }, "node-id"},
      {"--worker-heartbeat-timeout 45 t.py",
       [](auto& o) { return o.worker_heartbeat_timeout == absl::Seconds(45); }, "hb"},
      {"--worker-heartbeat-timeout 0 t.py",
       [](auto& o) { return o.worker_heartbeat_timeout == absl::ZeroDuration(); }, "hb off"},
      {"--hang-timeout 30 t.py", [](auto& o) { return o.hang_timeout == absl::Seconds(30); },
       "hang"},
      {"--hang-timeout 0 t.py", [](auto& o) { return o.hang_timeout == absl::ZeroDuration(); },
       "hang off"},
      {"t.py", [](auto& o) { return o.hang_timeout == absl::Seconds(10); }, "hang default"},
      {"--shutdown-timeout 5 t.py", [](auto& o) { return o.shutdown_timeout == absl::Seconds(5); },
       "shutdown"},
      {"--master-addr 1.2.3.4 --master_port 1234 --start-method spawn t.py",
       [](auto& o) {
         return o.static_form && o.master_addr == "1.2.3.4" && o.master_port == 1234 &&
                o.coordinator == "1.2.3.4:1235" && o.notes.size() == 1;
       },
       "static form (torch.distributed.launch)"},
      {"--help", [](auto& o) { return o.help; }, "help without entry point"},
      {"-h", [](auto& o) { return o.help; }, "-h"},
  };
  for (const Row& row : rows) {
    // Every multi-node row needs a job id; a row's own --rdzv-id wins (later).
    auto parsed = ParseLaunchOptions(Args("--rdzv-id row " + row.line), TestHost());
    ASSERT_TRUE(parsed.ok()) << row.what << ": " << row.line << " -> " << parsed.status();
    EXPECT_TRUE(row.check(*parsed)) << row.what << ": " << row.line;
  }
}

// Issue 29, point 1: launch's first documented example runs with nothing
// else started; a coordinator named anywhere, several nodes or the c10d form
// keep their meaning.
TEST(ParseLaunchOptionsTest, Parse_OneNodeNoCoordinator_RunsStandaloneKeepingTheJobId) {
  LaunchOptions plain = ParseOk("--nproc_per_node=2 --use_env train.py");
  EXPECT_TRUE(plain.standalone);
  EXPECT_TRUE(plain.use_env);
  LaunchOptions named = ParseOk("--nnodes 1 --rdzv-id exp7 train.py");
  EXPECT_TRUE(named.standalone);
  EXPECT_EQ(named.job_id, "exp7");
  EXPECT_FALSE(ParseOk("--rdzv-endpoint h:1 train.py").standalone);
  EXPECT_FALSE(ParseOk("--rdzv-backend c10d --rdzv-endpoint h:1 train.py").standalone);
  EXPECT_FALSE(ParseOk("train.py", TestHost(0, {{"DDP_COORDINATOR", "c:29400"}})).standalone);
  EXPECT_FALSE(ParseOk("--nnodes 2 --rdzv-id j train.py").standalone);
}

// Issue 29, points 2 and 3: torch.distributed.launch's static form passes
// --local_rank unless --use_env, and its node rank names the node.
TEST(ParseLaunchOptionsTest, Parse_StaticForm_LocalRankArgumentAndNodeIdFromNodeRank) {
  LaunchOptions o =
      ParseOk("--nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port 29500 t.py");
  EXPECT_TRUE(o.static_form);
  EXPECT_FALSE(o.use_env);  // --local_rank=N reaches the script, as launch does
  EXPECT_EQ(o.node_id, "host-a-node-rank-1");
  LaunchOptions env =
      ParseOk("--nnodes 2 --node-rank 0 --master-port 29500 --use_env --node-id n0 t.py");
  EXPECT_TRUE(env.use_env);
  EXPECT_EQ(env.node_id, "n0");
  // torchrun's forms never pass it.
  EXPECT_TRUE(ParseOk("--nnodes 2 --rdzv-id j --rdzv-endpoint h:1 --node-rank 1 t.py").use_env);
}

TEST(ParseLaunchOptionsTest, Parse_UnambiguousPrefix_AsArgparse) {
  LaunchOptions o = ParseOk("--nproc 4 --max-re 2 train.py");
  EXPECT_EQ(o.nproc_per_node, 4);
  EXPECT_EQ(o.max_restarts, 2);
  EXPECT_EQ(ParseOk("--nproc_per 3 train.py").nproc_per_node, 3);
}

TEST(ParseLaunchOptionsTest, Parse_AmbiguousPrefix_NamesTheCandidates) {
  auto parsed = ParseLaunchOptions(Args("--no 2 train.py"), TestHost());
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("ambiguous flag '--no'"), absl::string_view::npos)
      << parsed.status();
  EXPECT_NE(parsed.status().message().find("--node-rank"), absl::string_view::npos);
}

TEST(ParseLaunchOptionsTest, Parse_PortlessEndpoint_DefaultsTo29400) {
  EXPECT_EQ(ParseOk("--rdzv-endpoint head-0 t.py").coordinator, "head-0:29400");
  EXPECT_EQ(ParseOk("--rdzv-endpoint head-0:1234 t.py").coordinator, "head-0:1234");
  EXPECT_EQ(ParseOk("--rdzv-endpoint [::1] t.py").coordinator, "[::1]:29400");
}

TEST(ParseLaunchOptionsTest, Parse_CoordinatorList_EachEntryCheckedAndDefaulted) {
  EXPECT_EQ(ParseOk("--coordinator a,b:1,[::1] t.py").coordinator, "a:29400,b:1,[::1]:29400");
  HostInfo host = TestHost(0, {{"DDP_COORDINATOR", "c1:7000,c2:7000"}});
  EXPECT_EQ(ParseOk("t.py", host).coordinator, "c1:7000,c2:7000");
  auto bad = ParseLaunchOptions(Args("--coordinator a:1,b:99999 t.py"), TestHost());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'b:99999'"), absl::string_view::npos) << bad.status();
  auto c10d = ParseLaunchOptions(Args("--rdzv-backend c10d --rdzv-endpoint a,b t.py"), TestHost());
  ASSERT_FALSE(c10d.ok());
  EXPECT_NE(c10d.status().message().find("names several"), absl::string_view::npos);
}

TEST(ParseLaunchOptionsTest, Parse_RdzvBackendsWeDoNotServe_ClearErrors) {
  for (const char* backend : {"etcd", "etcd-v2", "static", "zookeeper"}) {
    auto parsed =
        ParseLaunchOptions(Args(std::string("--rdzv-backend ") + backend + " t.py"), TestHost());
    ASSERT_FALSE(parsed.ok()) << backend;
    EXPECT_NE(parsed.status().message().find(backend), absl::string_view::npos) << parsed.status();
    EXPECT_NE(parsed.status().message().find("c10d"), absl::string_view::npos) << parsed.status();
  }
  EXPECT_EQ(ParseOk("--rdzv-backend c10d-experimental t.py").rdzv_backend, "c10d");
}

TEST(ParseLaunchOptionsTest, Parse_StaticForm_CoordinatorAtMasterPortPlusOne) {
  LaunchOptions o = ParseOk(
      "--nnodes 2 --node-rank 1 --master-addr 10.0.0.1 --master-port 1234 --nproc-per-node 2 t.py");
  EXPECT_TRUE(o.static_form);
  EXPECT_EQ(o.coordinator, "10.0.0.1:1235");
  EXPECT_EQ(o.job_id, "static-10.0.0.1-1234");
  EXPECT_EQ(o.node_rank, 1);
  auto no_rank = ParseLaunchOptions(
      Args("--nnodes 2 --master-addr 10.0.0.1 --master-port 1234 t.py"), TestHost());
  ASSERT_FALSE(no_rank.ok());
  EXPECT_NE(no_rank.status().message().find("--node-rank"), absl::string_view::npos);
  // With a coordinator the master flags are noted and unused.
  LaunchOptions with = ParseOk("--coordinator c:1 --job j --master-addr 10.0.0.1 t.py");
  EXPECT_FALSE(with.static_form);
  EXPECT_EQ(with.coordinator, "c:1");
}

TEST(ParseLaunchOptionsTest, Parse_Prewarm_ModulesInOrder) {
  EXPECT_TRUE(ParseOk("t.py").prewarm.empty());
  EXPECT_EQ(ParseOk("--prewarm torch,torch.distributed,_x9 t.py").prewarm,
            (std::vector<std::string>{"torch", "torch.distributed", "_x9"}));
  EXPECT_EQ(ParseOk("t.py", TestHost(0, {{"DDP_PREWARM", "numpy"}})).prewarm,
            (std::vector<std::string>{"numpy"}));
  std::string many = "m0";
  for (int i = 1; i < 33; ++i) many += ",m" + std::to_string(i);
  auto parsed = ParseLaunchOptions(Args("--prewarm " + many + " t.py"), TestHost());
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("up to 32"), std::string::npos) << parsed.status();
}

TEST(ParseLaunchOptionsTest, Parse_InProcessRestart_FlagEnvironmentAndTimeout) {
  EXPECT_FALSE(ParseOk("t.py").in_process_restart);
  EXPECT_EQ(ParseOk("t.py").in_process_restart_timeout, absl::Seconds(5));
  LaunchOptions o = ParseOk("--in-process-restart --in-process-restart-timeout 1.5 t.py");
  EXPECT_TRUE(o.in_process_restart);
  EXPECT_EQ(o.in_process_restart_timeout, absl::Milliseconds(1500));
  EXPECT_TRUE(
      ParseOk("t.py", TestHost(0, {{"DDP_IN_PROCESS_RESTART", "true"}})).in_process_restart);
  EXPECT_FALSE(ParseOk("--in-process-restart=false t.py").in_process_restart);
}

TEST(ParseLaunchOptionsTest, Parse_RunPath_WinsOverNoPython) {
  LaunchOptions o = ParseOk("--no-python --run-path /abs/train.py");
  EXPECT_TRUE(o.run_path);
  EXPECT_FALSE(o.no_python);
}

TEST(ParseLaunchOptionsTest, Parse_LastCallOverJoin_ErrorNamesBothUserValues) {
  auto parsed = ParseLaunchOptions(Args("--rdzv-conf join_timeout=5,last_call_timeout=60 train.py"),
                                   TestHost());
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("last_call_timeout=1m"), absl::string_view::npos)
      << parsed.status();
  EXPECT_NE(parsed.status().message().find("join_timeout=5s"), absl::string_view::npos);
}

TEST(ParseLaunchOptionsTest, Parse_NoJobId_SchedulerIdFromEnvironment) {
  LaunchOptions slurm = ParseOk("--nnodes 2 t.py", TestHost(0, {{"SLURM_JOB_ID", "4242"}}));
  EXPECT_EQ(slurm.job_id, "4242");
  LaunchOptions te = ParseOk(
      "--nnodes 2 t.py", TestHost(0, {{"TORCHELASTIC_RUN_ID", "tx-1"}, {"SLURM_JOB_ID", "4242"}}));
  EXPECT_EQ(te.job_id, "tx-1");
}

TEST(ParseLaunchOptionsTest, Parse_NoJobIdMultiNode_RefusedNamingTheFlag) {
  auto parsed = ParseLaunchOptions(Args("--nnodes 1:4 t.py"), TestHost());
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("--rdzv-id"), absl::string_view::npos)
      << parsed.status();
  // Two single-node runs never share an id.
  EXPECT_NE(ParseOk("t.py").job_id, ParseOk("t.py").job_id);
}

TEST(ParseLaunchOptionsTest, Parse_FlagsAfterEntryPoint_BelongToScript) {
  LaunchOptions o = ParseOk("--job j --nnodes 2 train.py --nnodes 5 --lr 0.1 -m");
  EXPECT_EQ(o.max_nodes, 2);
  EXPECT_FALSE(o.module);
  EXPECT_EQ(o.script_args, (std::vector<std::string>{"--nnodes", "5", "--lr", "0.1", "-m"}));
}

TEST(ParseLaunchOptionsTest, Parse_DoubleDash_EndsFlags) {
  LaunchOptions o = ParseOk("--job j --nnodes 2 -- --weird-name.py a");
  EXPECT_EQ(o.entrypoint, "--weird-name.py");
  EXPECT_EQ(o.script_args, std::vector<std::string>{"a"});
}

TEST(ParseLaunchOptionsTest, Parse_GpuWithGpus_UsesGpuCount) {
  EXPECT_EQ(ParseOk("--nproc-per-node gpu t.py", TestHost(4)).nproc_per_node, 4);
  EXPECT_EQ(ParseOk("--nproc-per-node auto t.py", TestHost(2)).nproc_per_node, 2);
}

TEST(ParseLaunchOptionsTest, Parse_Environment_DefaultsAndCommandLineWins) {
  HostInfo host = TestHost(0, {{"DDP_COORDINATOR", "coord:7000"},
                               {"PYTHON_EXEC", "/usr/bin/python3"},
                               {"PET_NNODES", "2:3"},
                               {"PET_RDZV_ID", "from-pet"},
                               {"PET_NPROC_PER_NODE", "2"}});
  LaunchOptions o = ParseOk("--nproc-per-node 3 t.py", host);
  EXPECT_EQ(o.coordinator, "coord:7000");
  EXPECT_EQ(o.python_exec, "/usr/bin/python3");
  EXPECT_EQ(o.min_nodes, 2);
  EXPECT_EQ(o.max_nodes, 3);
  EXPECT_EQ(o.nproc_per_node, 3);
  EXPECT_EQ(ParseOk("--coordinator other:1 t.py", host).coordinator, "other:1");
}

struct BadRow {
  std::string line;
  std::string expected_in_message;
};

TEST(ParseLaunchOptionsTest, Parse_BadInput_InvalidArgumentWithClearMessage) {
  const std::vector<BadRow> rows = {
      {"--bogus t.py", "unknown flag '--bogus'"},
      {"--in-process-restart-timeout 0 t.py", "--in-process-restart-timeout"},
      {"--in-process-restart-timeout soon t.py", "invalid value 'soon'"},
      {"--prewarm torch,,numpy t.py", "invalid value 'torch,,numpy' for --prewarm"},
      {"--prewarm 1torch t.py", "comma-separated Python modules"},
      {"--prewarm torch;rm t.py", "e.g. torch,torch.distributed"},
      {"--prewarm torch. t.py", "--prewarm"},
      {"--prewarm torch --no-python t.sh", "--no-python runs ENTRYPOINT without"},
      {"--nproc_pre_node=2 t.py", "unknown flag '--nproc-pre-node'"},
      {"--nnodes 3:2 t.py", "MIN (3) is greater than MAX (2)"},
      {"--nnodes 0 t.py", "1 <= MIN <= MAX"},
      {"--nnodes 1:2:3 t.py", "N or MIN:MAX"},
      {"--nnodes x t.py", "invalid value 'x' for --nnodes"},
      {"--nproc-per-node gpu t.py", "no NVIDIA GPU"},
      {"--nproc-per-node 0 t.py", "between 1 and"},
      {"--nproc-per-node many t.py", "a number, auto, cpu or gpu"},
      {"--max-restarts -1 t.py", "--max-restarts"},
      {"--monitor-interval 0 t.py", "greater than 0"},
      {"--hang-timeout 0.5 t.py",
       "invalid value '0.5' for --hang-timeout: expected 0 (off), or at least 2s"},
      {"--hang-timeout -1 t.py", "invalid value '-1' for --hang-timeout"},
      {"--hang-timeout 800000 t.py", "at most"},
      {"--monitor-interval soon t.py", "'soon'"},
      {"--rdzv-id a/b t.py", "[A-Za-z0-9._-]"},
      {"--rdzv-endpoint nohost:99999 t.py", "HOST:PORT"},
      {"--rdzv-endpoint h:70000 t.py", "HOST:PORT"},
      {"--rdzv-conf foo=1 t.py", "unknown --rdzv-conf key 'foo'"},
      {"--rdzv-conf join_timeout t.py", "key=value"},
      {"--rdzv-conf join_timeout=-3 t.py", "join_timeout"},
      {"-r 4 t.py", "--redirects"},
      {"--tee 0:9 t.py", "--tee"},
      {"--local-ranks-filter a,b t.py", "comma-separated local ranks"},
      {"--node-rank -1 t.py", "--node-rank"},
      {"--start-method thread t.py", "spawn, fork or forkserver"},
      {"--use-env=maybe t.py", "true or false"},
      {"--nnodes", "--nnodes needs a value"},
      {"--nnodes 2", "missing ENTRYPOINT"},
      {"", "missing ENTRYPOINT"},
      {"-m --no-python x", "cannot be used together"},
  };
  for (const BadRow& row : rows) {
    auto parsed = ParseLaunchOptions(Args(row.line), TestHost());
    ASSERT_FALSE(parsed.ok()) << row.line;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << row.line;
    EXPECT_NE(parsed.status().message().find(row.expected_in_message), std::string::npos)
        << row.line << " -> " << parsed.status();
  }
}

TEST(ParseLaunchOptionsTest, Parse_EmptyEntrypoint_Refused) {
  // Found by tests/fuzz:command_line_fuzz.
  auto parsed = ParseLaunchOptions({"--standalone", "", "--lr", "1"}, TestHost());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("ENTRYPOINT is an empty string"), std::string::npos)
      << parsed.status();
}

TEST(ParseLaunchOptionsTest, Parse_BadEnvironmentValue_NamesTheVariable) {
  auto parsed = ParseLaunchOptions(Args("t.py"), TestHost(0, {{"PET_NNODES", "zz"}}));
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("$PET_NNODES"), std::string::npos) << parsed.status();
}

TEST(ParseLaunchOptionsTest, Parse_HugeValue_MessageIsCapped) {
  const std::string huge(100000, 'x');
  auto parsed = ParseLaunchOptions({"--nnodes", huge, "t.py"}, TestHost());
  ASSERT_FALSE(parsed.ok());
  EXPECT_LT(parsed.status().message().size(), 400u);
}

TEST(LaunchUsageTest, Usage_MentionsEveryFlag) {
  const std::string usage = LaunchUsage();
  for (const char* flag : {"--nnodes",
                           "--nproc-per-node",
                           "--max-restarts",
                           "--monitor-interval",
                           "--rdzv-id",
                           "--job",
                           "--rdzv-endpoint",
                           "--coordinator",
                           "--rdzv-conf",
                           "--rdzv-backend",
                           "--standalone",
                           "--role",
                           "--module",
                           "--no-python",
                           "--use-env",
                           "--log-dir",
                           "--redirects",
                           "--tee",
                           "--local-ranks-filter",
                           "--local-addr",
                           "--node-rank",
                           "--node-id",
                           "--worker-heartbeat-timeout",
                           "--hang-timeout",
                           "--shutdown-timeout",
                           "PYTHON_EXEC",
                           "DDP_COORDINATOR",
                           "--help"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  }
}

TEST(HostInfoTest, FromSystem_ReportsCpusAndHostname) {
  HostInfo host = HostInfo::FromSystem();
  EXPECT_GE(host.cpu_count, 1);
  EXPECT_FALSE(host.hostname.empty());
  EXPECT_GE(host.gpu_count, 0);
  ASSERT_TRUE(host.getenv);
}

}  // namespace
}  // namespace ddp::client
