#include "client/entry_point_check.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/worker_command.h"
#include "client/worker_process.h"
#include "common/logging.h"

namespace ddp::client {
namespace {

// The probe's exit codes (kProbeProgram).
constexpr int kProbeOk = 0;
constexpr int kProbeModuleMissing = 3;
constexpr int kProbeImportMissing = 4;
constexpr int kProbeSyntaxError = 5;
constexpr int kProbeUnreadable = 6;

// argv: kind ("module" | "script"), target. Prints one line on a finding.
constexpr char kProbeProgram[] = R"py(
import ast, importlib.util, os, sys
kind, target = sys.argv[1], sys.argv[2]
def missing(name):
    try:
        spec = importlib.util.find_spec(name)
    except Exception as e:  # a parent package failed to import
        return "%s: %s" % (type(e).__name__, e)
    return None if spec else "No module named '%s'" % name
if kind == "module":
    why = missing(target)
    if why:
        print(why)
        sys.exit(3)
    sys.exit(0)
sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
try:
    with open(target, "rb") as f:
        source = f.read()
except OSError as e:
    print(e.strerror or str(e))
    sys.exit(6)
try:
    tree = ast.parse(source, target)
except (SyntaxError, ValueError) as e:
    print("%s: %s (line %s)" % (type(e).__name__, getattr(e, "msg", e), getattr(e, "lineno", "?")))
    sys.exit(5)
for node in tree.body:
    name = None
    if isinstance(node, ast.Import):
        name = node.names[0].name
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__":
        name = node.module
    if name:
        top = name.split(".")[0]
        why = missing(top)
        if why:
            print("%s\n%s" % (top, why))
            sys.exit(4)
        break
sys.exit(0)
)py";

constexpr char kNothingSpent[] = " (the node did not join; no restart was spent)";

bool IsRegularFile(const std::string& path, bool* readable) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *readable = access(path.c_str(), R_OK) == 0;
  return true;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// "; did you mean 'train.py'?" for a file of the same folder at most two edits
// away, else "".
std::string DidYouMean(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return "";
  std::string best;
  size_t best_distance = 3;
  while (dirent* entry = readdir(d)) {
    const std::string candidate = entry->d_name;
    if (candidate == "." || candidate == "..") continue;
    const size_t distance = EditDistance(name, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  closedir(d);
  if (best.empty()) return "";
  return absl::StrCat("; did you mean '",
                      slash == std::string::npos ? best : absl::StrCat(dir, "/", best), "'?");
}

std::string WorkingDirectory() {
  char buffer[4096];
  return getcwd(buffer, sizeof(buffer)) != nullptr ? std::string(buffer) : std::string(".");
}

struct ProbeAnswer {
  int exit_code = -1;  // -1: no answer (could not run, timed out, killed)
  std::string output;
};

std::string ReadAll(int fd) {
  std::string out;
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      out.append(buffer, static_cast<size_t>(n));
      if (out.size() > 64 * 1024) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  return out;
}

ProbeAnswer RunProbe(const LaunchOptions& launch, const EntryPointCheckOptions& options,
                     const std::string& kind, const std::string& target) {
  ProbeAnswer answer;
  std::vector<std::string> env = options.env;
  if (env.empty()) {
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  }
  absl::StatusOr<SpawnedWorker> child =
      SpawnWorker({launch.python_exec, "-c", kProbeProgram, kind, target}, env, WorkerStdio{});
  if (!child.ok()) {
    DDP_LOG(WARNING) << "could not check the entry point (" << child.status().message()
                     << "); the workers will tell";
    return answer;
  }
  pollfd exited{child->pidfd, POLLIN, 0};
  int ready;
  do {
    ready = poll(&exited, 1, static_cast<int>(absl::ToInt64Milliseconds(options.probe_timeout)));
  } while (ready < 0 && errno == EINTR);
  if (ready <= 0) {
    SignalProcessGroup(child->pid, SIGKILL);
    DDP_LOG(WARNING) << launch.python_exec << " took more than "
                     << absl::FormatDuration(options.probe_timeout)
                     << " to examine the entry point; not checked";
  }
  int status = 0;
  while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Non-blocking pipes, the writer gone: read what is there.
  answer.output = ReadAll(child->stdout_fd);
  close(child->stdout_fd);
  close(child->stderr_fd);
  close(child->pidfd);
  if (ready > 0 && WIFEXITED(status)) answer.exit_code = WEXITSTATUS(status);
  if (!child->exec_error.empty()) answer.exit_code = -1;
  return answer;
}

std::string FirstLine(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  return std::string(text.substr(0, text.find('\n')));
}

absl::Status Refuse(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(what, kNothingSpent));
}

}  // namespace

absl::Status CheckEntryPoint(const LaunchOptions& launch, const EntryPointCheckOptions& options) {
  const std::string& entry = launch.entrypoint;
  if (!RunsUnderPython(launch)) {
    if (!launch.no_python) return absl::OkStatus();  // an executable file runs as it is
    if (IsExecutableEntryPoint(entry)) return absl::OkStatus();
    if (entry.find('/') != std::string::npos && Exists(entry)) {
      return Refuse(absl::StrCat("the entry point '", entry,
                                 "' is not executable (--no-python runs it as it is): chmod +x "
                                 "it, or drop --no-python to run it under ",
                                 launch.python_exec));
    }
    return Refuse(absl::StrCat("the entry point '", entry,
                               "' was not found (--no-python runs it as it is: a path, or a name "
                               "on PATH)",
                               entry.find('/') != std::string::npos ? DidYouMean(entry) : ""));
  }
  const bool module = launch.module;
  if (!module) {
    bool readable = false;
    if (!IsRegularFile(entry, &readable)) {
      return Refuse(absl::StrCat("the training script '", entry, "' does not exist (in ",
                                 WorkingDirectory(), ")", DidYouMean(entry)));
    }
    if (!readable) {
      return Refuse(absl::StrCat("the training script '", entry,
                                 "' cannot be read by this user: check its permissions"));
    }
  }
  if (!IsExecutableEntryPoint(launch.python_exec)) {
    return Refuse(absl::StrCat("the interpreter '", launch.python_exec,
                               "' for Python entry points was not found (PYTHON_EXEC, else "
                               "python3 on PATH): install it or set PYTHON_EXEC"));
  }
  const ProbeAnswer answer = RunProbe(launch, options, module ? "module" : "script", entry);
  switch (answer.exit_code) {
    case kProbeOk:
      return absl::OkStatus();
    case kProbeModuleMissing:
      return Refuse(absl::StrCat(launch.python_exec, " cannot find the module '", entry,
                                 "' (-m): ", FirstLine(answer.output),
                                 ". Check its name and PYTHONPATH (from ", WorkingDirectory(),
                                 "), or set PYTHON_EXEC to the interpreter that has it"));
    case kProbeImportMissing: {
      const std::string name = FirstLine(answer.output);
      const std::string why = FirstLine(answer.output.substr(answer.output.find('\n') + 1));
      return Refuse(absl::StrCat(launch.python_exec, " cannot import '", name,
                                 "', the first import of ", entry, " (", why, "): install it for ",
                                 launch.python_exec,
                                 " or set PYTHON_EXEC to an interpreter that has it"));
    }
    case kProbeSyntaxError:
      return Refuse(absl::StrCat("the training script '", entry, "' does not compile under ",
                                 launch.python_exec, ": ", FirstLine(answer.output)));
    case kProbeUnreadable:
      return Refuse(absl::StrCat("the training script '", entry,
                                 "' cannot be read: ", FirstLine(answer.output)));
    default:
      if (answer.exit_code > 0) {
        DDP_LOG(WARNING) << "the entry point check under " << launch.python_exec
                         << " exited with code " << answer.exit_code << " ("
                         << FirstLine(answer.output) << "); not checked";
      }
      return absl::OkStatus();
  }
}

}  // namespace ddp::client
