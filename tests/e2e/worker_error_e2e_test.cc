// The error travels (issue 25.1) and the launcher's error file (issue 29.5),
// with real processes: a coordinator, ddp-client and a Python worker that
// fails with a traceback; `ddpctl jobs logs` shows the worker's own words,
// and ddp-client's TORCHELASTIC_ERROR_FILE holds what torchrun writes there.

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/training_fixture.h"

namespace ddp::testing {
namespace {

class WorkerErrorE2eTest : public TrainingE2eTest {
 protected:
  // A script that fails after a line of its own on stderr, through torch's
  // @record when `record` (it then writes TORCHELASTIC_ERROR_FILE).
  std::string WriteFailingScript(bool record) {
    const std::string path = Path(record ? "fail_record.py" : "fail_plain.py");
    std::ofstream out(path);
    out << "import sys\n";
    if (record) out << "from torch.distributed.elastic.multiprocessing.errors import record\n";
    out << "def load_batch(step):\n"
        << "    raise ValueError(f'bad batch at step {step}')\n"
        << (record ? "@record\n" : "") << "def main():\n"
        << "    print('loading data', file=sys.stderr, flush=True)\n"
        << "    load_batch(3)\n"
        << "main()\n";
    return path;
  }

  AgentProcess& RunOnce(const std::string& script) {
    AgentArgsOptions options = AgentOptions("node-a");
    options.rdzv_conf.clear();  // ddp-client's defaults
    options.nproc_per_node = 1;
    options.max_restarts = 0;
    options.entrypoint = {script};
    return Launch("node-a", AgentArgs(options));
  }

  ShellResult Ddpctl(const std::string& args) const {
    return RunShell(absl::StrCat(Runfile("tools/ddpctl/ddpctl"), " --coordinator ",
                                 coordinator_->address(), " ", args));
  }
};

TEST_F(WorkerErrorE2eTest, FailingScript_JobsLogsShowsTracebackAndSummaryNoDocsLink) {
  StartCoordinator();
  AgentProcess& agent = RunOnce(WriteFailingScript(/*record=*/false));
  ASSERT_NE(agent.Wait(kBound), 0) << agent.log();
  const std::string log = agent.log();
  // The closing summary carries the worker's traceback, not torchrun's link.
  EXPECT_TRUE(absl::StrContains(log, "ValueError: bad batch at step 3")) << log;
  EXPECT_FALSE(absl::StrContains(log, "To enable traceback see")) << log;
  EXPECT_TRUE(absl::StrContains(log, "  logs      : node-a:")) << log;

  const ShellResult logs = Ddpctl(absl::StrCat("jobs logs ", job_));
  ASSERT_EQ(logs.exit_code, 0) << logs.output;
  EXPECT_TRUE(absl::StrContains(logs.output, "traceback:\n  Traceback (most recent call last):"))
      << logs.output;
  EXPECT_TRUE(absl::StrContains(logs.output, "  ValueError: bad batch at step 3\n")) << logs.output;
  EXPECT_TRUE(absl::StrContains(logs.output, "stderr (last lines):\n  loading data\n"))
      << logs.output;
  EXPECT_TRUE(absl::StrContains(logs.output, "logs: node-a:" + Path("logs"))) << logs.output;
  const ShellResult by_rank = Ddpctl(absl::StrCat("jobs logs ", job_, " --rank 0 --generation 1"));
  EXPECT_EQ(by_rank.exit_code, 0) << by_rank.output;
  EXPECT_EQ(Ddpctl(absl::StrCat("jobs logs ", job_, " --rank 5")).exit_code, 1);
  const ShellResult get = Ddpctl(absl::StrCat("jobs get ", job_));
  EXPECT_TRUE(absl::StrContains(get.output, "error: ValueError: bad batch at step 3"))
      << get.output;

  // The coordinator keeps it across a restart (persisted with the failures).
  coordinator_->Kill9();
  ASSERT_TRUE(coordinator_->Start().ok());
  EXPECT_TRUE(PollUntil(
      [&] {
        return absl::StrContains(Ddpctl(absl::StrCat("jobs logs ", job_)).output,
                                 "ValueError: bad batch at step 3");
      },
      kBound));
}

// torchrun's @record copies the first failure's error file with its errorCode
// to the launcher's TORCHELASTIC_ERROR_FILE: the same fields, side by side.
TEST_F(WorkerErrorE2eTest, RecordScript_LauncherErrorFileAsTorchrunWritesIt) {
  StartCoordinator();
  const std::string script = WriteFailingScript(/*record=*/true);
  AgentProcess& agent = RunOnce(script);
  ASSERT_NE(agent.Wait(kBound), 0) << agent.log();
  const std::string ours = Path("node-a.launcher_error.json");
  const std::string theirs = Path("torchrun_error.json");
  const ShellResult torchrun = RunShell(absl::StrCat(
      "cd ", dir_, " && TORCHELASTIC_ERROR_FILE=", theirs,
      " /usr/bin/python3 -m torch.distributed.run -r 1 -t 1 --nproc_per_node 1 --max_restarts 0 ",
      "--standalone ", script, " 2>&1"));
  ASSERT_NE(torchrun.exit_code, 0) << torchrun.output;
  // Everything but the timestamp (and the frames' file paths are the same
  // script's): compared as parsed JSON.
  const std::string canon =
      "import json,sys; d=json.load(open(sys.argv[1])); m=d['message']; "
      "m['extraInfo'].pop('timestamp'); print(json.dumps(d, sort_keys=True))";
  const ShellResult a = RunShell(absl::StrCat("/usr/bin/python3 -c \"", canon, "\" ", ours));
  const ShellResult b = RunShell(absl::StrCat("/usr/bin/python3 -c \"", canon, "\" ", theirs));
  ASSERT_EQ(a.exit_code, 0) << a.output << ReadWholeFile(ours);
  ASSERT_EQ(b.exit_code, 0) << b.output << torchrun.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_TRUE(absl::StrContains(a.output, "\"errorCode\": 1")) << a.output;
}

}  // namespace
}  // namespace ddp::testing
