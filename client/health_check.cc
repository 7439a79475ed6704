#include "client/health_check.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/gloo_check_source.h"

namespace ddp::client {
namespace {

absl::Status Bad(absl::string_view flag, absl::string_view value, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " '", value.substr(0, 200), value.size() > 200 ? "..." : "", "': ", why,
                   "; expected CMD, name=NAME,timeout=DUR,cmd=CMD, builtin=disk[,min-free=BYTES], "
                   "builtin=gpus or builtin=gloo[,world-size=N]"));
}

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxHealthCheckNameChars) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.') return false;
  }
  return true;
}

// "1073741824", "512M", "1G".
bool ParseBytes(absl::string_view text, int64_t* out) {
  int64_t unit = 1;
  if (!text.empty()) {
    switch (absl::ascii_toupper(text.back())) {
      case 'K':
        unit = int64_t{1} << 10;
        break;
      case 'M':
        unit = int64_t{1} << 20;
        break;
      case 'G':
        unit = int64_t{1} << 30;
        break;
      case 'T':
        unit = int64_t{1} << 40;
        break;
      default:
        break;
    }
    if (unit != 1) text.remove_suffix(1);
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(text, &n) || n < 0 || n > (int64_t{1} << 50) / unit) return false;
  *out = n * unit;
  return true;
}

std::string Tail(std::string text) {
  if (text.size() > kMaxHealthCheckOutputBytes) {
    text = text.substr(text.size() - kMaxHealthCheckOutputBytes);
  }
  return text;
}

// Runs `argv` (argv[0] a path or a name looked up in PATH) in its own
// process group with stdin from /dev/null, its stdout and stderr collected.
HealthCheckOutcome RunProcess(const HealthCheckSpec& spec, const std::vector<std::string>& argv) {
  HealthCheckOutcome out;
  out.name = spec.name;
  // Built before fork: the child only calls async-signal-safe functions.
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const std::string exec_failed = absl::StrCat("cannot run ", argv[0], ": ");
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    out.output = absl::StrCat("cannot make a pipe: ", strerror(errno));
    return out;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    out.output = absl::StrCat("cannot fork: ", strerror(errno));
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return out;
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execvp(args[0], args.data());
    const char* why = strerror(errno);
    ssize_t ignored = write(STDOUT_FILENO, exec_failed.data(), exec_failed.size());
    ignored = write(STDOUT_FILENO, why, strlen(why));
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also here: no race with the child's own call
  close(pipe_fds[1]);
  const absl::Time deadline = absl::Now() + spec.timeout;
  std::string output;
  bool timed_out = false;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    pollfd fd{pipe_fds[0], POLLIN, 0};
    const int ready = poll(
        &fd, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // every writer closed: the command (and its children) ended
    output.append(buffer, static_cast<size_t>(n));
    if (output.size() > 4 * kMaxHealthCheckOutputBytes) output = Tail(std::move(output));
  }
  close(pipe_fds[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!timed_out) kill(-pid, SIGKILL);  // what it left behind in its group
  out.output = Tail(std::move(output));
  if (timed_out) {
    absl::StrAppend(&out.output, out.output.empty() || out.output.back() == '\n' ? "" : "\n",
                    "timed out after ", absl::FormatDuration(spec.timeout));
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    out.passed = true;
  } else {
    absl::StrAppend(&out.output, out.output.empty() || out.output.back() == '\n' ? "" : "\n",
                    WIFEXITED(status) ? absl::StrCat("exit code ", WEXITSTATUS(status))
                                      : absl::StrCat("killed by signal ", WTERMSIG(status)));
  }
  return out;
}

HealthCheckOutcome RunCommand(const HealthCheckSpec& spec) {
  return RunProcess(spec, {"/bin/sh", "-c", spec.command});
}

// client/gloo_check.py under the workers' interpreter; it says what went wrong
// (torch missing, the collective failed) on its stdout.
HealthCheckOutcome RunGloo(const HealthCheckSpec& spec, const HealthCheckEnvironment& env) {
  const std::string python = env.python.empty() ? "python3" : env.python;
  return RunProcess(spec,
                    {python, "-c", GlooCheckSource(), absl::StrCat(spec.gloo_world_size), python});
}

HealthCheckOutcome RunDisk(const HealthCheckSpec& spec, const HealthCheckEnvironment& env) {
  HealthCheckOutcome out;
  out.name = spec.name;
  struct statvfs fs {};
  const std::string dir = env.log_dir.empty() ? "." : env.log_dir;
  if (statvfs(dir.c_str(), &fs) != 0) {
    out.output = absl::StrCat("cannot read the free space of ", dir, ": ", strerror(errno));
    return out;
  }
  const int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  out.passed = free_bytes >= spec.min_free_bytes;
  out.output =
      absl::StrCat(free_bytes >> 20, " MiB free in ", dir, "; ",
                   out.passed ? "at least " : "needs at least ", spec.min_free_bytes >> 20, " MiB");
  return out;
}

HealthCheckOutcome RunGpus(const HealthCheckSpec& spec, const HealthCheckEnvironment& env) {
  HealthCheckOutcome out;
  out.name = spec.name;
  std::vector<std::string> ids;
  if (!env.cuda_visible_devices.empty()) {
    ids = absl::StrSplit(env.cuda_visible_devices, ',', absl::SkipWhitespace());
  } else {
    for (int i = 0; i < env.announced_gpus; ++i) ids.push_back(absl::StrCat(i));
  }
  if (ids.empty()) {
    out.passed = true;
    out.output = "the node announces no GPU (no CUDA_VISIBLE_DEVICES, no --nproc-per-node gpu)";
    return out;
  }
  std::vector<std::string> missing;
  for (const std::string& id : ids) {
    int index = 0;
    struct stat st {};
    const std::string path = absl::StrCat(env.device_dir, "/nvidia", id);
    if (!absl::SimpleAtoi(id, &index) || stat(path.c_str(), &st) != 0) missing.push_back(path);
  }
  out.passed = missing.empty();
  out.output = out.passed ? absl::StrCat(ids.size(), " GPUs visible")
                          : absl::StrCat("not visible: ", absl::StrJoin(missing, ", "), " (",
                                         ids.size(), " GPUs announced)");
  return out;
}

}  // namespace

absl::StatusOr<HealthCheckSpec> ParseHealthCheck(absl::string_view flag, absl::string_view value,
                                                 int index) {
  HealthCheckSpec spec;
  spec.name = absl::StrCat("check-", index);
  const bool keyed = absl::StartsWith(value, "name=") || absl::StartsWith(value, "timeout=") ||
                     absl::StartsWith(value, "cmd=") || absl::StartsWith(value, "builtin=");
  if (!keyed) {
    if (absl::StripAsciiWhitespace(value).empty()) return Bad(flag, value, "empty command");
    spec.command = std::string(value);
    return spec;
  }
  absl::string_view rest = value;
  bool has_cmd = false, has_builtin = false, has_world_size = false;
  while (!rest.empty()) {
    if (absl::ConsumePrefix(&rest, "cmd=")) {
      spec.command = std::string(rest);
      has_cmd = true;
      break;
    }
    const size_t comma = rest.find(',');
    absl::string_view field = rest.substr(0, comma);
    rest = comma == absl::string_view::npos ? absl::string_view() : rest.substr(comma + 1);
    const size_t eq = field.find('=');
    if (eq == absl::string_view::npos) {
      return Bad(flag, value, absl::StrCat("'", field, "' is not KEY=VALUE"));
    }
    const absl::string_view key = field.substr(0, eq), v = field.substr(eq + 1);
    if (key == "name") {
      if (!ValidName(v)) {
        return Bad(flag, value,
                   absl::StrCat("name '", v, "' is not 1-", kMaxHealthCheckNameChars,
                                " of A-Z a-z 0-9 _ - ."));
      }
      spec.name = std::string(v);
    } else if (key == "timeout") {
      absl::Duration d;
      if (!absl::ParseDuration(v, &d) || d <= absl::ZeroDuration() || d > kMaxHealthCheckTimeout) {
        return Bad(flag, value,
                   absl::StrCat("timeout '", v, "' is not a duration in (0, ",
                                absl::FormatDuration(kMaxHealthCheckTimeout), "], e.g. 10s"));
      }
      spec.timeout = d;
    } else if (key == "builtin") {
      has_builtin = true;
      if (v == "disk") {
        spec.kind = HealthCheckSpec::Kind::kDisk;
      } else if (v == "gpus") {
        spec.kind = HealthCheckSpec::Kind::kGpus;
      } else if (v == "gloo") {
        spec.kind = HealthCheckSpec::Kind::kGloo;
      } else {
        return Bad(flag, value, absl::StrCat("unknown builtin '", v, "' (disk, gpus, gloo)"));
      }
      if (spec.name.rfind("check-", 0) == 0) spec.name = std::string(v);
    } else if (key == "min-free") {
      if (!ParseBytes(v, &spec.min_free_bytes)) {
        return Bad(flag, value,
                   absl::StrCat("min-free '", v, "' is not a byte count (e.g. 1G, 512M)"));
      }
    } else if (key == "world-size") {
      if (!absl::SimpleAtoi(v, &spec.gloo_world_size) || spec.gloo_world_size < 1 ||
          spec.gloo_world_size > kMaxGlooCheckWorldSize) {
        return Bad(flag, value,
                   absl::StrCat("world-size '", v, "' is not a number of ranks in [1, ",
                                kMaxGlooCheckWorldSize, "]"));
      }
      has_world_size = true;
    } else {
      return Bad(flag, value,
                 absl::StrCat("unknown key '", key,
                              "' (name, timeout, cmd, builtin, min-free, world-size)"));
    }
  }
  if (has_world_size && spec.kind != HealthCheckSpec::Kind::kGloo) {
    return Bad(flag, value, "world-size= is for builtin=gloo only");
  }
  if (has_cmd == has_builtin) {
    return Bad(flag, value, "give exactly one of cmd=CMD (last) and builtin=NAME");
  }
  if (has_cmd && absl::StripAsciiWhitespace(spec.command).empty()) {
    return Bad(flag, value, "empty command");
  }
  return spec;
}

HealthCheckOutcome RunHealthCheck(const HealthCheckSpec& spec, const HealthCheckEnvironment& env,
                                  const Clock& clock) {
  const absl::Time start = clock.Now();
  HealthCheckOutcome out;
  switch (spec.kind) {
    case HealthCheckSpec::Kind::kCommand:
      out = RunCommand(spec);
      break;
    case HealthCheckSpec::Kind::kDisk:
      out = RunDisk(spec, env);
      break;
    case HealthCheckSpec::Kind::kGpus:
      out = RunGpus(spec, env);
      break;
    case HealthCheckSpec::Kind::kGloo:
      out = RunGloo(spec, env);
      break;
  }
  out.took = clock.Now() - start;
  return out;
}

}  // namespace ddp::client
