#include "client/agent/node_health_checks.h"

#include <string>
#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

using ::testing::HasSubstr;

LaunchOptions WithChecks(const std::vector<std::string>& values) {
  LaunchOptions launch;
  int index = 1;
  for (const std::string& value : values) {
    auto spec = ParseHealthCheck("--health-check", value, index++);
    EXPECT_TRUE(spec.ok()) << spec.status();
    launch.health_checks.push_back(*spec);
  }
  return launch;
}

TEST(NodeHealthCheckEnvironmentTest, FromTheAgentsFlags) {
  LaunchOptions launch;
  launch.nproc_per_node_spec = "gpu";
  launch.nproc_per_node = 4;
  launch.python_exec = "/opt/venv/bin/python";
  const HealthCheckEnvironment env = NodeHealthCheckEnvironment(launch, "/var/log/run", "2,3");
  EXPECT_EQ(env.log_dir, "/var/log/run");
  EXPECT_EQ(env.cuda_visible_devices, "2,3");
  EXPECT_EQ(env.announced_gpus, 4);
  EXPECT_EQ(env.python, "/opt/venv/bin/python");
  launch.nproc_per_node_spec = "4";
  EXPECT_EQ(NodeHealthCheckEnvironment(launch, "", "").announced_gpus, 0);
}

TEST(RunNodeHealthChecksTest, OneResultPerCheckInOrder_FirstFailedNamed) {
  const LaunchOptions launch =
      WithChecks({"true", "name=ecc,cmd=echo 'ECC errors: 3'; exit 1", "name=late,cmd=exit 2"});
  const std::vector<v1::HealthCheckResult> results =
      RunNodeHealthChecks(launch, HealthCheckEnvironment{}, "test", RealClock::Get());
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].name(), "check-1");
  EXPECT_TRUE(results[0].passed());
  EXPECT_FALSE(results[1].passed());
  EXPECT_THAT(results[1].output(), HasSubstr("ECC errors: 3"));
  EXPECT_GT(results[1].time_unix_ms(), 0);
  const v1::HealthCheckResult* failed = FirstFailedCheck(results);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->name(), "ecc");
}

TEST(RunNodeHealthChecksTest, AllPassed_NoFailedCheck) {
  const std::vector<v1::HealthCheckResult> results = RunNodeHealthChecks(
      WithChecks({"true", "exit 0"}), HealthCheckEnvironment{}, "test", RealClock::Get());
  EXPECT_EQ(results.size(), 2u);
  EXPECT_EQ(FirstFailedCheck(results), nullptr);
  EXPECT_EQ(FirstFailedCheck({}), nullptr);
}

}  // namespace
}  // namespace ddp::client
