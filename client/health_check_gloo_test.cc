// builtin=gloo (client/gloo_check.py) with real interpreters and torch.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "client/health_check.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

using ::testing::HasSubstr;

constexpr char kPythonWithTorch[] = "/usr/bin/python3";

std::string TempDir() {
  const char* root = getenv("TEST_TMPDIR");
  return root != nullptr ? root : "/tmp";
}

bool TorchImportable(const std::string& python) {
  return std::system((python + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

HealthCheckSpec GlooSpec(int world_size) {
  auto spec = ParseHealthCheck(
      "--health-check", "builtin=gloo,timeout=120s,world-size=" + std::to_string(world_size), 1);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

TEST(GlooHealthCheckTest, PythonWithTorch_AllReduceOnLoopbackPasses) {
  if (!TorchImportable(kPythonWithTorch)) {
    GTEST_SKIP() << "skipped: " << kPythonWithTorch
                 << " cannot import torch here (apt-get install python3-torch)";
  }
  HealthCheckEnvironment env;
  env.python = kPythonWithTorch;
  const HealthCheckOutcome out = RunHealthCheck(GlooSpec(2), env, RealClock::Get());
  EXPECT_TRUE(out.passed) << out.output;
  EXPECT_EQ(out.name, "gloo");
  EXPECT_THAT(out.output, HasSubstr("gloo all_reduce of 2 ranks on loopback: sum correct"));
}

TEST(GlooHealthCheckTest, PythonWithoutTorch_FailsNamingTheInterpreter) {
  // The same interpreter with site-packages off (-S): torch is not importable,
  // whatever this machine has installed.
  const std::string python = TempDir() + "/python-without-torch";
  std::ofstream(python) << "#!/bin/sh\nexec " << kPythonWithTorch << " -I -S \"$@\"\n";
  ASSERT_EQ(chmod(python.c_str(), 0755), 0);
  if (access(kPythonWithTorch, X_OK) != 0) {
    GTEST_SKIP() << "skipped: no " << kPythonWithTorch << " to run without its site-packages";
  }
  HealthCheckEnvironment env;
  env.python = python;
  const HealthCheckOutcome out = RunHealthCheck(GlooSpec(2), env, RealClock::Get());
  EXPECT_FALSE(out.passed);
  EXPECT_THAT(out.output, HasSubstr("builtin=gloo needs torch importable by " + python));
  EXPECT_THAT(out.output, HasSubstr("exit code 3"));
}

TEST(GlooHealthCheckTest, MissingInterpreter_FailsSayingItCannotRun) {
  HealthCheckEnvironment env;
  env.python = TempDir() + "/no-such-python";
  const HealthCheckOutcome out = RunHealthCheck(GlooSpec(2), env, RealClock::Get());
  EXPECT_FALSE(out.passed);
  EXPECT_THAT(out.output, HasSubstr("cannot run " + env.python));
  EXPECT_THAT(out.output, HasSubstr("exit code 127"));
}

}  // namespace
}  // namespace ddp::client
