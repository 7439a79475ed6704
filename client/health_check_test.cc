#include "client/health_check.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* root = getenv("TEST_TMPDIR");
  return root != nullptr ? root : "/tmp";
}

TEST(ParseHealthCheckTest, BareCommand_NamedByIndex) {
  auto spec = ParseHealthCheck("--health-check", "nvidia-smi -L", 2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "check-2");
  EXPECT_EQ(spec->command, "nvidia-smi -L");
  EXPECT_EQ(spec->timeout, absl::Seconds(60));
}

TEST(ParseHealthCheckTest, Keyed_CommandKeepsItsCommas) {
  auto spec = ParseHealthCheck("--health-check", "name=net,timeout=2s,cmd=echo a,b", 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "net");
  EXPECT_EQ(spec->timeout, absl::Seconds(2));
  EXPECT_EQ(spec->command, "echo a,b");
}

TEST(ParseHealthCheckTest, Builtins) {
  auto disk = ParseHealthCheck("--health-check", "builtin=disk,min-free=512M", 1);
  ASSERT_TRUE(disk.ok()) << disk.status();
  EXPECT_EQ(disk->kind, HealthCheckSpec::Kind::kDisk);
  EXPECT_EQ(disk->name, "disk");
  EXPECT_EQ(disk->min_free_bytes, int64_t{512} << 20);
  auto gpus = ParseHealthCheck("--health-check", "builtin=gpus", 1);
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(gpus->kind, HealthCheckSpec::Kind::kGpus);
}

TEST(ParseHealthCheckTest, Gloo_DefaultTwoRanksOrWorldSizeWithTimeout) {
  auto gloo = ParseHealthCheck("--health-check", "builtin=gloo", 1);
  ASSERT_TRUE(gloo.ok()) << gloo.status();
  EXPECT_EQ(gloo->kind, HealthCheckSpec::Kind::kGloo);
  EXPECT_EQ(gloo->name, "gloo");
  EXPECT_EQ(gloo->gloo_world_size, 2);
  auto wide =
      ParseHealthCheck("--health-check", "name=net,builtin=gloo,world-size=8,timeout=90s", 3);
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->name, "net");
  EXPECT_EQ(wide->gloo_world_size, 8);
  EXPECT_EQ(wide->timeout, absl::Seconds(90));
}

TEST(ParseHealthCheckTest, Gloo_BadWorldSize_NamesTheValueAndTheLimit) {
  for (const char* bad :
       {"builtin=gloo,world-size=0", "builtin=gloo,world-size=65", "builtin=gloo,world-size=two",
        "builtin=disk,world-size=2", "name=x,world-size=2,cmd=true"}) {
    auto spec = ParseHealthCheck("--health-check", bad, 1);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(spec.status().message(), HasSubstr(bad)) << bad;
  }
  EXPECT_THAT(
      ParseHealthCheck("--health-check", "builtin=gloo,world-size=65", 1).status().message(),
      HasSubstr("[1, 64]"));
  EXPECT_THAT(ParseHealthCheck("--health-check", "builtin=disk,world-size=2", 1).status().message(),
              HasSubstr("builtin=gloo only"));
}

TEST(ParseHealthCheckTest, BadValues_NameTheValueAndTheLimit) {
  for (const char* bad : {"", "  ", "name=x", "cmd=", "timeout=0s,cmd=true", "timeout=2h,cmd=true",
                          "name=a b,cmd=true", "builtin=fans", "name=x,colour=red,cmd=true",
                          "builtin=disk,cmd=true", "builtin=disk,min-free=lots"}) {
    auto spec = ParseHealthCheck("--health-check", bad, 1);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(spec.status().message(), HasSubstr("--health-check")) << bad;
  }
  EXPECT_THAT(ParseHealthCheck("--health-check", "timeout=2h,cmd=true", 1).status().message(),
              HasSubstr("1h"));
}

TEST(RunHealthCheckTest, Command_PassesOnZeroFailsWithOutputAndExitCode) {
  HealthCheckSpec ok{HealthCheckSpec::Kind::kCommand, "ok", absl::Seconds(10), "echo fine"};
  HealthCheckOutcome passed = RunHealthCheck(ok, {}, RealClock::Get());
  EXPECT_TRUE(passed.passed);
  EXPECT_EQ(passed.output, "fine\n");
  HealthCheckSpec bad{HealthCheckSpec::Kind::kCommand, "bad", absl::Seconds(10),
                      "echo 'ECC errors: 12' >&2; exit 3"};
  HealthCheckOutcome failed = RunHealthCheck(bad, {}, RealClock::Get());
  EXPECT_FALSE(failed.passed);
  EXPECT_EQ(failed.name, "bad");
  EXPECT_THAT(failed.output, HasSubstr("ECC errors: 12"));
  EXPECT_THAT(failed.output, HasSubstr("exit code 3"));
}

TEST(RunHealthCheckTest, Command_TimeoutKillsItsGroup) {
  HealthCheckSpec slow{HealthCheckSpec::Kind::kCommand, "slow", absl::Milliseconds(300),
                       "sleep 30 & sleep 30"};
  const absl::Time start = absl::Now();
  HealthCheckOutcome out = RunHealthCheck(slow, {}, RealClock::Get());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_FALSE(out.passed);
  EXPECT_THAT(out.output, HasSubstr("timed out after 300ms"));
}

TEST(RunHealthCheckTest, Disk_ComparesFreeSpace) {
  HealthCheckSpec disk{HealthCheckSpec::Kind::kDisk, "disk"};
  disk.min_free_bytes = 1;
  EXPECT_TRUE(RunHealthCheck(disk, {TempDir()}, RealClock::Get()).passed);
  disk.min_free_bytes = int64_t{1} << 50;  // a petabyte
  HealthCheckOutcome out = RunHealthCheck(disk, {TempDir()}, RealClock::Get());
  EXPECT_FALSE(out.passed);
  EXPECT_THAT(out.output, HasSubstr("needs at least"));
}

TEST(RunHealthCheckTest, Gpus_AnnouncedDevicesMustExist) {
  const std::string dev = TempDir() + "/fake-dev";
  mkdir(dev.c_str(), 0755);
  std::ofstream(dev + "/nvidia0") << "";
  HealthCheckSpec gpus{HealthCheckSpec::Kind::kGpus, "gpus"};
  HealthCheckEnvironment env;
  env.device_dir = dev;
  env.cuda_visible_devices = "0";
  EXPECT_TRUE(RunHealthCheck(gpus, env, RealClock::Get()).passed);
  env.cuda_visible_devices = "0,1";
  HealthCheckOutcome out = RunHealthCheck(gpus, env, RealClock::Get());
  EXPECT_FALSE(out.passed);
  EXPECT_THAT(out.output, HasSubstr("nvidia1"));
  env.cuda_visible_devices = "";
  env.announced_gpus = 0;
  EXPECT_TRUE(RunHealthCheck(gpus, env, RealClock::Get()).passed);
}

TEST(RunHealthCheckTest, TookMeasuredOnTheClock) {
  FakeClock clock;
  HealthCheckSpec ok{HealthCheckSpec::Kind::kCommand, "ok", absl::Seconds(10), "true"};
  EXPECT_EQ(RunHealthCheck(ok, {}, clock).took, absl::ZeroDuration());
}

}  // namespace
}  // namespace ddp::client
