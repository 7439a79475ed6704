#include "client/worker_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ddp::client {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0 &&
         access(path.c_str(), X_OK) == 0;
}

}  // namespace

bool IsExecutableEntryPoint(const std::string& entrypoint) {
  if (entrypoint.empty()) return false;
  if (entrypoint.find('/') != std::string::npos) return IsExecutableFile(entrypoint);
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    if (IsExecutableFile(absl::StrCat(dir, "/", entrypoint))) return true;
  }
  return false;
}

bool RunsUnderPython(const LaunchOptions& o,
                     const std::function<bool(const std::string&)>& is_executable) {
  return o.run_path || (!o.no_python && (o.module || absl::EndsWith(o.entrypoint, ".py") ||
                                         !is_executable(o.entrypoint)));
}

std::vector<std::string> BuildWorkerArgv(
    const LaunchOptions& o, int local_rank,
    const std::function<bool(const std::string&)>& is_executable) {
  std::vector<std::string> argv;
  if (RunsUnderPython(o, is_executable)) {
    argv = {o.python_exec, "-u"};
    if (o.module) argv.push_back("-m");
  }
  argv.push_back(o.entrypoint);
  if (!o.use_env) argv.push_back(absl::StrCat(o.local_rank_arg, "=", local_rank));
  argv.insert(argv.end(), o.script_args.begin(), o.script_args.end());
  return argv;
}

}  // namespace ddp::client
