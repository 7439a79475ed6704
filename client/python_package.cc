#include "client/python_package.h"

#include <limits.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ddp::client {
namespace {

// The Bazel workspace name (WORKSPACE) and the package's folder in it.
constexpr char kRunfilesPackagePath[] = "/ddp_coordinator/python";
// Where tools/install.sh puts the package, from the folder of PREFIX/bin.
constexpr char kInstalledPackagePath[] = "/../lib/python3/dist-packages";

bool HoldsPackage(const std::string& folder) {
  return access(absl::StrCat(folder, "/ddp_coordinator/__init__.py").c_str(), R_OK) == 0;
}

}  // namespace

std::string BundledPythonPackagePath(const std::string& executable, const EnvMap& env) {
  std::vector<std::string> runfiles;
  if (!executable.empty()) runfiles.push_back(absl::StrCat(executable, ".runfiles"));
  for (const char* name : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    auto it = env.find(name);
    if (it != env.end() && !it->second.empty()) runfiles.push_back(it->second);
  }
  for (const std::string& root : runfiles) {
    std::string folder = absl::StrCat(root, kRunfilesPackagePath);
    if (HoldsPackage(folder)) return folder;
  }
  const size_t slash = executable.rfind('/');
  if (slash != std::string::npos) {
    std::string installed = absl::StrCat(executable.substr(0, slash), kInstalledPackagePath);
    if (HoldsPackage(installed)) return installed;
  }
  return "";
}

EnvMap WithPythonPath(EnvMap env, const std::string& path) {
  if (path.empty()) return env;
  std::string& python_path = env["PYTHONPATH"];
  if (python_path.empty()) {
    python_path = path;
    return env;
  }
  for (absl::string_view entry : absl::StrSplit(python_path, ':')) {
    if (entry == path) return env;
  }
  absl::StrAppend(&python_path, ":", path);
  return env;
}

EnvMap WithPythonPathFirst(EnvMap env, const std::string& path) {
  if (path.empty()) return env;
  std::vector<std::string> entries = {path};
  auto found = env.find("PYTHONPATH");
  if (found != env.end() && !found->second.empty()) {
    for (absl::string_view entry : absl::StrSplit(found->second, ':')) {
      if (entry != path) entries.emplace_back(entry);
    }
  }
  env["PYTHONPATH"] = absl::StrJoin(entries, ":");
  return env;
}

std::string CurrentExecutable() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return "";
  return std::string(buffer, static_cast<size_t>(n));
}

}  // namespace ddp::client
