// StandaloneCoordinator with a stand-in "coordinator" shell script that writes
// its port file like the real one.

#include "client/agent/standalone_coordinator.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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
  options.command = {WriteScript("serves", kServes)};
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
  options.command = {WriteScript("dies", "exit 3\n")};
  auto child = StandaloneCoordinator::Start(options);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(child.status().message().find("exit code 3"), std::string::npos) << child.status();
}

TEST(StandaloneCoordinator, Start_NoPortInTime_Unavailable) {
  StandaloneCoordinatorOptions options;
  options.command = {WriteScript("silent", "exec sleep 60\n")};
  options.start_timeout = absl::Milliseconds(200);
  auto child = StandaloneCoordinator::Start(options);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kUnavailable);
}

// The command's leading arguments come first, then the coordinator's flags.
TEST(StandaloneCoordinator, Start_CommandWithArguments_FlagsFollowThem) {
  StandaloneCoordinatorOptions options;
  options.command = {WriteScript("serves_after_mode", R"(test "$1" = "--mode" || exit 9
shift
)" + std::string(kServes)),
                     "--mode"};
  auto child = StandaloneCoordinator::Start(options);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ((*child)->address(), "127.0.0.1:4321");
}

TEST(DefaultServeCommand, ThisExecutableWithServeCoordinator) {
  auto command = DefaultServeCommand();
  ASSERT_TRUE(command.ok()) << command.status();
  ASSERT_EQ(command->size(), 2u);
  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  EXPECT_EQ((*command)[0], std::string(self));
  EXPECT_EQ((*command)[1], "--serve-coordinator");
}

}  // namespace
}  // namespace ddp::client
