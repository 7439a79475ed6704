// End to end with real PyTorch workers (Debian's /usr/bin/python3 with torch):
// the environment built by worker_env + the argv of worker_command + the
// supervisor let init_process_group("gloo") form a group, and torch's @record
// error file reaches the exit report. Skipped where that interpreter has no
// torch.

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/free_port.h"
#include "client/launch_options.h"
#include "client/worker_command.h"
#include "client/worker_env.h"
#include "client/worker_supervisor.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

constexpr char kPython[] = "/usr/bin/python3";
constexpr char kTorchDir[] = "/usr/lib/python3/dist-packages/torch";

constexpr char kScript[] = R"(import os
import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    dist.init_process_group("gloo")
    t = torch.tensor([float(os.environ["RANK"]) + 1])
    dist.all_reduce(t)
    print("sum", int(t.item()), "rank", dist.get_rank(), "ws", dist.get_world_size(),
          "restart", os.environ["TORCHELASTIC_RESTART_COUNT"], flush=True)
    if os.environ.get("FAIL_RANK") == os.environ["RANK"]:
        raise RuntimeError("boom from rank " + os.environ["RANK"])
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
)";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class WorkerTorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st;
    if (stat(kTorchDir, &st) != 0) GTEST_SKIP() << "no torch for " << kPython;
    dir_ = absl::StrCat(getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(MakeDirectories(dir_).ok());
    script_ = dir_ + "/train.py";
    std::ofstream(script_) << kScript;
  }

  // Runs `nproc` workers as one node of a one-node job; returns their exits by
  // local rank.
  std::vector<WorkerExit> Run(int nproc, const EnvMap& extra_env) {
    LaunchOptions options;
    options.entrypoint = script_;
    options.python_exec = kPython;
    options.nproc_per_node = nproc;
    v1::Assignment assignment;
    assignment.set_generation(3);
    assignment.set_restart_count(1);
    assignment.set_world_size(nproc);
    assignment.set_master_addr("127.0.0.1");
    assignment.set_master_port(*PickFreePort({"127.0.0.1", 20000, 16}));
    WorkerEnvContext context{"torchjob", "localhost:29400", "default", 2, nproc};
    EnvMap base = CurrentEnvironment();
    base["GLOO_SOCKET_IFNAME"] = "lo";
    for (const auto& [k, v] : extra_env) base[k] = v;

    std::vector<WorkerSpec> specs;
    for (int local_rank = 0; local_rank < nproc; ++local_rank) {
      WorkerSpec spec;
      spec.local_rank = local_rank;
      spec.global_rank = local_rank;
      spec.argv = BuildWorkerArgv(options, local_rank);
      spec.files = WorkerFilesFor(dir_, assignment.generation(), local_rank);
      spec.env = BuildWorkerEnv(assignment, context, local_rank, spec.files, base);
      spec.redirect = Std::kAll;
      specs.push_back(spec);
      files_.push_back(spec.files);
    }
    absl::Mutex mu;
    std::vector<WorkerExit> exits(nproc);
    int count = 0;
    WorkerSupervisor supervisor(WorkerSupervisor::Options(), RealClock::Get(),
                                [&](const WorkerExit& e) {
                                  absl::MutexLock lock(&mu);
                                  exits[e.local_rank] = e;
                                  ++count;
                                });
    EXPECT_TRUE(supervisor.Start(specs).ok());
    EXPECT_TRUE(supervisor.AwaitAllExited(absl::Seconds(120)));
    EXPECT_TRUE(supervisor.Stop(absl::Seconds(5)).ok());
    absl::MutexLock lock(&mu);
    EXPECT_EQ(count, nproc);
    return exits;
  }

  std::string dir_;
  std::string script_;
  std::vector<WorkerFiles> files_;
};

TEST_F(WorkerTorchTest, TwoWorkers_GlooAllReduce_BothSucceed) {
  std::vector<WorkerExit> exits = Run(2, {});
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(exits[r].succeeded()) << r << ": " << exits[r].Describe() << "\n"
                                      << ReadFile(files_[r].stderr_log);
    EXPECT_EQ(ReadFile(files_[r].stdout_log), absl::StrCat("sum 3 rank ", r, " ws 2 restart 1\n"));
  }
}

TEST_F(WorkerTorchTest, RecordDecorator_RaisingRank_ErrorFileMessageReported) {
  std::vector<WorkerExit> exits = Run(2, {{"FAIL_RANK", "1"}});
  EXPECT_TRUE(exits[0].succeeded()) << ReadFile(files_[0].stderr_log);
  EXPECT_EQ(exits[1].kind, WorkerExit::Kind::kExited);
  EXPECT_EQ(exits[1].exit_code, 1);
  ASSERT_TRUE(exits[1].error.has_value()) << ReadFile(files_[1].stderr_log);
  EXPECT_EQ(exits[1].error->message, "RuntimeError: boom from rank 1");
  EXPECT_NE(exits[1].error->traceback.find("Traceback"), std::string::npos);
}

}  // namespace
}  // namespace ddp::client
