#include "client/python_package.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace ddp::client {
namespace {

std::string TempDir(const std::string& name) {
  std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  mkdir(dir.c_str(), 0755);
  return dir;
}

// Makes ROOT/ddp_coordinator/python/ddp_coordinator/__init__.py.
void MakePackage(const std::string& runfiles) {
  mkdir(runfiles.c_str(), 0755);
  mkdir((runfiles + "/ddp_coordinator").c_str(), 0755);
  mkdir((runfiles + "/ddp_coordinator/python").c_str(), 0755);
  mkdir((runfiles + "/ddp_coordinator/python/ddp_coordinator").c_str(), 0755);
  std::ofstream(runfiles + "/ddp_coordinator/python/ddp_coordinator/__init__.py") << "\n";
}

TEST(BundledPythonPackagePathTest, Find_ExecutableRunfiles_Found) {
  const std::string dir = TempDir("exe");
  MakePackage(dir + "/ddp-client.runfiles");
  EXPECT_EQ(BundledPythonPackagePath(dir + "/ddp-client", {}),
            dir + "/ddp-client.runfiles/ddp_coordinator/python");
}

TEST(BundledPythonPackagePathTest, Find_RunfilesDirOfTheEnvironment_Found) {
  const std::string dir = TempDir("env");
  MakePackage(dir + "/runfiles");
  EXPECT_EQ(
      BundledPythonPackagePath(dir + "/no-such-binary", {{"RUNFILES_DIR", dir + "/runfiles"}}),
      dir + "/runfiles/ddp_coordinator/python");
  EXPECT_EQ(BundledPythonPackagePath("", {{"TEST_SRCDIR", dir + "/runfiles"}}),
            dir + "/runfiles/ddp_coordinator/python");
}

TEST(BundledPythonPackagePathTest, Find_InstalledLayout_Found) {
  const std::string prefix = TempDir("prefix");
  mkdir((prefix + "/bin").c_str(), 0755);
  mkdir((prefix + "/lib").c_str(), 0755);
  mkdir((prefix + "/lib/python3").c_str(), 0755);
  mkdir((prefix + "/lib/python3/dist-packages").c_str(), 0755);
  mkdir((prefix + "/lib/python3/dist-packages/ddp_coordinator").c_str(), 0755);
  std::ofstream(prefix + "/lib/python3/dist-packages/ddp_coordinator/__init__.py") << "\n";
  EXPECT_EQ(BundledPythonPackagePath(prefix + "/bin/ddp-client", {}),
            prefix + "/bin/../lib/python3/dist-packages");
}

TEST(BundledPythonPackagePathTest, Find_NoPackageInRunfiles_Empty) {
  const std::string dir = TempDir("empty");
  mkdir((dir + "/ddp-client.runfiles").c_str(), 0755);
  EXPECT_EQ(BundledPythonPackagePath(dir + "/ddp-client", {{"RUNFILES_DIR", dir}}), "");
  EXPECT_EQ(BundledPythonPackagePath("", {}), "");
}

TEST(WithPythonPathTest, Append_Unset_SetsIt) {
  EXPECT_EQ(WithPythonPath({}, "/pkg")["PYTHONPATH"], "/pkg");
  EXPECT_EQ(WithPythonPath({{"PYTHONPATH", ""}}, "/pkg")["PYTHONPATH"], "/pkg");
}

TEST(WithPythonPathTest, Append_UserEntries_KeptFirst) {
  EXPECT_EQ(WithPythonPath({{"PYTHONPATH", "/a:/b"}}, "/pkg")["PYTHONPATH"], "/a:/b:/pkg");
}

TEST(WithPythonPathTest, Append_AlreadyListedOrEmptyPath_Unchanged) {
  EXPECT_EQ(WithPythonPath({{"PYTHONPATH", "/pkg:/a"}}, "/pkg")["PYTHONPATH"], "/pkg:/a");
  EXPECT_EQ(WithPythonPath({{"X", "1"}}, "").count("PYTHONPATH"), 0u);
}

TEST(WithPythonPathFirstTest, Prepend_UserEntries_KeptAfter) {
  EXPECT_EQ(WithPythonPathFirst({}, "/site")["PYTHONPATH"], "/site");
  EXPECT_EQ(WithPythonPathFirst({{"PYTHONPATH", "/a:/b"}}, "/site")["PYTHONPATH"], "/site:/a:/b");
}

TEST(WithPythonPathFirstTest, Prepend_AlreadyListed_MovedFirst) {
  EXPECT_EQ(WithPythonPathFirst({{"PYTHONPATH", "/a:/site"}}, "/site")["PYTHONPATH"], "/site:/a");
  EXPECT_EQ(WithPythonPathFirst({{"X", "1"}}, "").count("PYTHONPATH"), 0u);
}

TEST(CurrentExecutableTest, Resolve_ThisTest_NamesAnExistingFile) {
  const std::string exe = CurrentExecutable();
  ASSERT_FALSE(exe.empty());
  struct stat st;
  EXPECT_EQ(stat(exe.c_str(), &st), 0);
}

}  // namespace
}  // namespace ddp::client
