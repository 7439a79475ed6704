// StandaloneCoordinator with a stand-in "coordinator" shell script that writes
// its port file like the real one.

#include "client/agent/standalone_coordinator.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

std::string WriteScript(const std::string& name, const std::string& body) {
  std::string path = absl::StrCat(getenv("TEST_TMPDIR"), "/", name);
  std::ofstream(path) << "#!/bin/sh\n" << body;
  chmod(path.c_str(), 0755);
  return path;
}

// The fake finds --port_file among its arguments and writes 4321 there.
constexpr char kServes[] = R"(while [ $# -gt 0 ]; do
  if [ "$1" = "--port_file" ]; then echo 4321 > "$2.tmp"; mv "$2.tmp" "$2"; fi
  shift
done
exec sleep 60
)";

TEST(StandaloneCoordinator, Start_PortFileWritten_AddressAndStopKills) {
  StandaloneCoordinatorOptions options;
  options.binary = WriteScript("serves", kServes);
  auto child = StandaloneCoordinator::Start(options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ((*child)->address(), "127.0.0.1:4321");
  const pid_t pid = (*child)->pid();
  ASSERT_GT(pid, 0);
  (*child)->Stop();
  EXPECT_NE(kill(pid, 0), 0);  // reaped, gone
  EXPECT_EQ((*child)->pid(), -1);
}

TEST(StandaloneCoordinator, Start_ChildExitsEarly_UnavailableWithStatus) {
  StandaloneCoordinatorOptions options;
  options.binary = WriteScript("dies", "exit 3\n");
  auto child = StandaloneCoordinator::Start(options);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(child.status().message().find("exit code 3"), std::string::npos) << child.status();
}

TEST(StandaloneCoordinator, Start_NoPortInTime_Unavailable) {
  StandaloneCoordinatorOptions options;
  options.binary = WriteScript("silent", "exec sleep 60\n");
  options.start_timeout = absl::Milliseconds(200);
  auto child = StandaloneCoordinator::Start(options);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kUnavailable);
}

TEST(FindCoordinatorBinary, NextToSelf_Found) {
  const std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/pair");
  mkdir(dir.c_str(), 0755);
  WriteScript("pair/coordinator", "exit 0\n");
  auto found = FindCoordinatorBinary(dir + "/ddp-client");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, dir + "/coordinator");
}

TEST(FindCoordinatorBinary, Nowhere_NotFoundNamingPlaces) {
  setenv("PATH", "/nonexistent-dir", 1);
  auto found = FindCoordinatorBinary("/nonexistent-bin/ddp-client");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(found.status().message().find("/nonexistent-bin/coordinator"), std::string::npos);
}

}  // namespace
}  // namespace ddp::client
