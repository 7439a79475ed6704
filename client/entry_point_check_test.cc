#include "client/entry_point_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::client {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Debian's interpreter (the one with torch on this machine's image when it has
// torch; the checks below need only the standard library).
constexpr char kPython[] = "/usr/bin/python3";

class EntryPointCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/entry_point_check.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    launch_.python_exec = kPython;
    options_.env = {"PATH=/usr/bin:/bin"};
  }
  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0644) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }
  absl::Status Check(const std::string& entry) {
    launch_.entrypoint = entry;
    return CheckEntryPoint(launch_, options_);
  }
  std::string dir_;
  LaunchOptions launch_;
  EntryPointCheckOptions options_;
};

TEST_F(EntryPointCheckTest, ScriptWithStandardImports_Ok) {
  EXPECT_TRUE(Check(Write("train.py", "import os, sys\nprint('hi')\n")).ok());
}

TEST_F(EntryPointCheckTest, MissingScript_RefusedNamingItAndTheCloseName) {
  Write("train.py", "import os\n");
  absl::Status status = Check(dir_ + "/trian.py");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("'" + dir_ + "/trian.py' does not exist"),
                                      HasSubstr("did you mean '" + dir_ + "/train.py'?"),
                                      HasSubstr("no restart was spent")));
}

TEST_F(EntryPointCheckTest, FirstImportMissing_RefusedNamingTheModuleAndInterpreter) {
  const std::string script = Write("train.py",
                                   "\"\"\"import os in a docstring is not an import.\"\"\"\n"
                                   "from __future__ import annotations\n"
                                   "import ddp_no_such_module_xyz.sub as m\nimport os\n");
  absl::Status status = Check(script);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      status.message(),
      AllOf(HasSubstr("/usr/bin/python3 cannot import 'ddp_no_such_module_xyz'"),
            HasSubstr("the first import of " + script),
            HasSubstr("No module named 'ddp_no_such_module_xyz'"), HasSubstr("PYTHON_EXEC")));
}

TEST_F(EntryPointCheckTest, FirstImportNextToTheScript_Found) {
  Write("helpers.py", "X = 1\n");
  EXPECT_TRUE(Check(Write("train.py", "import helpers\n")).ok());
}

TEST_F(EntryPointCheckTest, ImportInsideTryOrFunction_NotTheFirstImport) {
  EXPECT_TRUE(Check(Write("train.py",
                          "try:\n    import ddp_optional_missing_xyz\nexcept ImportError:\n"
                          "    pass\ndef f():\n    import ddp_missing_too_xyz\n"))
                  .ok());
}

TEST_F(EntryPointCheckTest, SyntaxError_RefusedWithTheLine) {
  absl::Status status = Check(Write("train.py", "import os\nif True print(1)\n"));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("does not compile"), HasSubstr("line 2")));
}

TEST_F(EntryPointCheckTest, MissingModule_Refused) {
  launch_.module = true;
  absl::Status status = Check("ddp_no_such_module_xyz");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("cannot find the module 'ddp_no_such_module_xyz' (-m)"));
  EXPECT_TRUE(Check("json.tool").ok());
}

TEST_F(EntryPointCheckTest, NoPythonNotExecutable_RefusedWithChmodHint) {
  launch_.no_python = true;
  absl::Status status = Check(Write("run.sh", "#!/bin/sh\nexit 0\n", 0644));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("is not executable"), HasSubstr("chmod +x")));
  EXPECT_TRUE(Check(Write("ok.sh", "#!/bin/sh\nexit 0\n", 0755)).ok());
  EXPECT_THAT(Check("ddp_no_such_program_xyz").message(), HasSubstr("was not found"));
}

TEST_F(EntryPointCheckTest, InterpreterMissing_RefusedNamingPythonExec) {
  launch_.python_exec = "/nonexistent/python9";
  absl::Status status = Check(Write("train.py", "import os\n"));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("'/nonexistent/python9'"), HasSubstr("PYTHON_EXEC")));
}

TEST_F(EntryPointCheckTest, ProbeTooSlow_NotRefused) {
  // An interpreter that never answers: the check gives up and lets the node
  // join (the workers will tell), rather than refusing on doubt.
  launch_.python_exec = Write("slow_python", "#!/bin/sh\nsleep 30\n", 0755);
  options_.probe_timeout = absl::Milliseconds(200);
  EXPECT_TRUE(Check(Write("train.py", "import os\n")).ok());
}

TEST_F(EntryPointCheckTest, ExecutableWithoutPyExtension_RunsAsItIsAndIsNotProbed) {
  launch_.python_exec = "/nonexistent/python9";  // never asked
  EXPECT_TRUE(Check(Write("train", "#!/bin/sh\nexit 0\n", 0755)).ok());
}

}  // namespace
}  // namespace ddp::client
