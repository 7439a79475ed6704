#include "client/worker_command.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

using Argv = std::vector<std::string>;

LaunchOptions Options(const std::string& entry, Argv args = {}) {
  LaunchOptions o;
  o.entrypoint = entry;
  o.script_args = std::move(args);
  o.python_exec = "/usr/bin/python3";
  return o;
}

bool NothingExecutable(const std::string&) { return false; }
bool EverythingExecutable(const std::string&) { return true; }

TEST(BuildWorkerArgvTest, Build_PyScript_RunsUnderPythonUnbuffered) {
  EXPECT_EQ(BuildWorkerArgv(Options("train.py", {"--lr", "0.1"}), 0, EverythingExecutable),
            (Argv{"/usr/bin/python3", "-u", "train.py", "--lr", "0.1"}));
}

TEST(BuildWorkerArgvTest, Build_LegacyDashSpelling_PassesTorch2LocalRank) {
  LaunchOptions o = Options("train.py", {"a"});
  o.use_env = false;
  EXPECT_EQ(BuildWorkerArgv(o, 3, EverythingExecutable),
            (Argv{"/usr/bin/python3", "-u", "train.py", "--local_rank=3", "a"}));
  o.local_rank_arg = "--local-rank";
  EXPECT_EQ(BuildWorkerArgv(o, 3, EverythingExecutable),
            (Argv{"/usr/bin/python3", "-u", "train.py", "--local-rank=3", "a"}));
}

TEST(BuildWorkerArgvTest, Build_RunPath_ExecutableStillThroughPython) {
  LaunchOptions o = Options("/abs/tool", {});
  o.run_path = true;
  EXPECT_EQ(BuildWorkerArgv(o, 0, EverythingExecutable),
            (Argv{"/usr/bin/python3", "-u", "/abs/tool"}));
}

TEST(BuildWorkerArgvTest, Build_Module_PythonDashM) {
  LaunchOptions o = Options("pkg.train", {"x"});
  o.module = true;
  EXPECT_EQ(BuildWorkerArgv(o, 0, EverythingExecutable),
            (Argv{"/usr/bin/python3", "-u", "-m", "pkg.train", "x"}));
}

TEST(BuildWorkerArgvTest, Build_Executable_RunsAsItIs) {
  EXPECT_EQ(BuildWorkerArgv(Options("./train_bin", {"a"}), 0, EverythingExecutable),
            (Argv{"./train_bin", "a"}));
}

TEST(BuildWorkerArgvTest, Build_NonExecutableNonPy_RunsUnderPythonLikeTorchrun) {
  EXPECT_EQ(BuildWorkerArgv(Options("script"), 0, NothingExecutable),
            (Argv{"/usr/bin/python3", "-u", "script"}));
}

TEST(BuildWorkerArgvTest, Build_NoPython_ForcesDirectEvenForPy) {
  LaunchOptions o = Options("train.py");
  o.no_python = true;
  EXPECT_EQ(BuildWorkerArgv(o, 0, NothingExecutable), (Argv{"train.py"}));
}

TEST(BuildWorkerArgvTest, Build_UseEnvFalse_AppendsLocalRankBeforeScriptArgs) {
  LaunchOptions o = Options("train.py", {"--lr", "1"});
  o.use_env = false;
  EXPECT_EQ(BuildWorkerArgv(o, 3, NothingExecutable),
            (Argv{"/usr/bin/python3", "-u", "train.py", "--local_rank=3", "--lr", "1"}));
}

TEST(IsExecutableEntryPointTest, RealFiles_DetectedThroughPathAndSlash) {
  EXPECT_TRUE(IsExecutableEntryPoint("/bin/sh"));
  EXPECT_TRUE(IsExecutableEntryPoint("sh"));  // via PATH
  const std::string plain = std::string(getenv("TEST_TMPDIR")) + "/plain.txt";
  FILE* f = fopen(plain.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  chmod(plain.c_str(), 0644);
  EXPECT_FALSE(IsExecutableEntryPoint(plain));
  chmod(plain.c_str(), 0755);
  EXPECT_TRUE(IsExecutableEntryPoint(plain));
  EXPECT_FALSE(IsExecutableEntryPoint("/no/such/file"));
  EXPECT_FALSE(IsExecutableEntryPoint("/bin"));  // a directory
  EXPECT_FALSE(IsExecutableEntryPoint(""));
}

}  // namespace
}  // namespace ddp::client
