#include "common/proc_stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ddp {
namespace {

constexpr size_t kQuoteLimit = 120;

std::string Quote(absl::string_view text) {
  return absl::StrCat("'", text.substr(0, kQuoteLimit), text.size() > kQuoteLimit ? "...'" : "'");
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": is the process alive?"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<absl::Duration> ParseStatCpuTime(absl::string_view stat, int64_t ticks_per_second) {
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos || ticks_per_second <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("not a /proc/PID/stat line: ", Quote(stat)));
  }
  // After ") ": field 3 (state) is index 0, so utime (14) is index 11.
  std::vector<absl::string_view> fields =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  int64_t utime = 0;
  int64_t stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return absl::InvalidArgumentError(
        absl::StrCat("no utime/stime in /proc/PID/stat line: ", Quote(stat)));
  }
  return absl::Seconds(1) * (utime + stime) / ticks_per_second;
}

absl::StatusOr<int64_t> ParseStatusRssBytes(absl::string_view status) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "VmRSS:")) continue;
    line = absl::StripAsciiWhitespace(line);
    int64_t kb = 0;
    if (!absl::ConsumeSuffix(&line, "kB") ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kb)) {
      return absl::InvalidArgumentError(absl::StrCat("unreadable VmRSS line: ", Quote(line)));
    }
    return kb * 1024;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no VmRSS line in /proc/PID/status: ", Quote(status)));
}

std::string ParseCpuModel(absl::string_view cpuinfo) {
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    if (!absl::StartsWith(line, "model name")) continue;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return "unknown";
}

std::string ParseStatName(absl::string_view stat) {
  const size_t open = stat.find('(');
  const size_t close = stat.rfind(')');
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
    return "";
  }
  return std::string(stat.substr(open + 1, close - open - 1));
}

absl::StatusOr<std::map<std::string, absl::Duration>> ReadThreadCpuByName(pid_t pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) {
    return absl::NotFoundError(absl::StrCat("cannot list ", dir, ": is the process alive?"));
  }
  const int64_t ticks = sysconf(_SC_CLK_TCK);
  std::map<std::string, absl::Duration> by_name;
  for (const auto& entry : it) {
    absl::StatusOr<std::string> stat = ReadFile(entry.path().string() + "/stat");
    if (!stat.ok()) continue;  // the thread ended meanwhile
    absl::StatusOr<absl::Duration> cpu = ParseStatCpuTime(*stat, ticks);
    if (!cpu.ok()) continue;
    by_name[ParseStatName(*stat)] += *cpu;
  }
  return by_name;
}

std::vector<std::pair<std::string, double>> BusiestThreads(
    const std::map<std::string, absl::Duration>& before,
    const std::map<std::string, absl::Duration>& after, absl::Duration window, size_t limit) {
  std::vector<std::pair<std::string, double>> out;
  if (window <= absl::ZeroDuration()) return out;
  for (const auto& [name, cpu] : after) {
    auto it = before.find(name);
    const absl::Duration used = cpu - (it == before.end() ? absl::ZeroDuration() : it->second);
    if (used > absl::ZeroDuration()) {
      out.emplace_back(name, absl::FDivDuration(used, window));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (out.size() > limit) out.resize(limit);
  return out;
}

absl::StatusOr<char> ParseStatState(absl::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos || close + 2 >= stat.size() || stat[close + 1] != ' ') {
    return absl::InvalidArgumentError(
        absl::StrCat("no state in /proc/PID/stat line: ", Quote(stat)));
  }
  return stat[close + 2];
}

absl::StatusOr<ProcessSample> SampleProcess(pid_t pid) {
  DDP_ASSIGN_OR_RETURN(std::string stat, ReadFile(absl::StrCat("/proc/", pid, "/stat")));
  ProcessSample sample;
  DDP_ASSIGN_OR_RETURN(char state, ParseStatState(stat));
  sample.state = state;
  DDP_ASSIGN_OR_RETURN(absl::Duration cpu, ParseStatCpuTime(stat, sysconf(_SC_CLK_TCK)));
  sample.cpu = cpu;
  return sample;
}

absl::StatusOr<absl::Duration> ReadProcessCpuTime(pid_t pid) {
  DDP_ASSIGN_OR_RETURN(std::string stat, ReadFile(absl::StrCat("/proc/", pid, "/stat")));
  return ParseStatCpuTime(stat, sysconf(_SC_CLK_TCK));
}

absl::StatusOr<StatActivity> ParseStatActivity(absl::string_view stat, int64_t ticks_per_second) {
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos || ticks_per_second <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("not a /proc/PID/stat line: ", Quote(stat)));
  }
  // After ") ": state (field 3) is index 0, ppid (4) index 1, pgrp (5)
  // index 2, utime (14)
  // index 11, stime 12, cutime 13, cstime 14.
  std::vector<absl::string_view> fields =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  StatActivity activity;
  int64_t ppid = 0;
  int64_t pgrp = 0;
  int64_t ticks[4] = {0, 0, 0, 0};
  bool ok = fields.size() >= 15 && fields[0].size() == 1 && absl::SimpleAtoi(fields[1], &ppid) &&
            absl::SimpleAtoi(fields[2], &pgrp);
  for (int i = 0; ok && i < 4; ++i) ok = absl::SimpleAtoi(fields[11 + i], &ticks[i]);
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("no state/ppid/pgrp/CPU times in /proc/PID/stat line: ", Quote(stat)));
  }
  activity.state = fields[0][0];
  activity.ppid = static_cast<pid_t>(ppid);
  activity.pgrp = static_cast<pid_t>(pgrp);
  activity.cpu_with_children =
      absl::Seconds(1) * (ticks[0] + ticks[1] + ticks[2] + ticks[3]) / ticks_per_second;
  return activity;
}

int64_t ParseIoCharBytes(absl::string_view io) {
  int64_t total = 0;
  for (absl::string_view line : absl::StrSplit(io, '\n')) {
    if (!absl::ConsumePrefix(&line, "rchar:") && !absl::ConsumePrefix(&line, "wchar:")) continue;
    int64_t bytes = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &bytes)) total += bytes;
  }
  return total;
}

std::vector<ProcessEntry> ScanProcesses() {
  std::vector<ProcessEntry> processes;
  std::error_code error;
  std::filesystem::directory_iterator it("/proc", error);
  if (error) return processes;
  const int64_t ticks = sysconf(_SC_CLK_TCK);
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    int pid = 0;
    if (name.empty() || !absl::ascii_isdigit(name[0]) || !absl::SimpleAtoi(name, &pid)) continue;
    absl::StatusOr<std::string> stat = ReadFile(entry.path().string() + "/stat");
    if (!stat.ok()) continue;  // it ended meanwhile
    absl::StatusOr<StatActivity> activity = ParseStatActivity(*stat, ticks);
    if (activity.ok()) {
      processes.push_back(ProcessEntry{static_cast<pid_t>(pid), *activity, ParseStatName(*stat)});
    }
  }
  return processes;
}

namespace {

// For each process of `processes` that is one of `roots` or descends from
// one: that root (the nearest, should roots nest).
std::map<pid_t, pid_t> RootsOf(const std::vector<ProcessEntry>& processes,
                               const std::vector<pid_t>& roots) {
  std::map<pid_t, pid_t> parent_of;
  for (const ProcessEntry& process : processes) parent_of[process.pid] = process.activity.ppid;
  std::map<pid_t, pid_t> root_of;
  for (const ProcessEntry& process : processes) {
    // Up the parents until a root or the top (pid 0/1, or a parent that is
    // gone); bounded by the number of processes, should /proc change under us.
    pid_t at = process.pid;
    for (size_t steps = 0; at > 1 && steps <= processes.size(); ++steps) {
      if (std::find(roots.begin(), roots.end(), at) != roots.end()) {
        root_of[process.pid] = at;
        break;
      }
      auto parent = parent_of.find(at);
      if (parent == parent_of.end()) break;
      at = parent->second;
    }
  }
  return root_of;
}

// Adds one process (its CPU time, state and /proc/PID/io bytes) to `sample`.
void AddToSample(const ProcessEntry& process, ProcessGroupSample& sample) {
  ++sample.processes;
  sample.cpu += process.activity.cpu_with_children;
  if (process.activity.state == 'D') sample.in_disk_wait = true;
  if (absl::StatusOr<std::string> io = ReadFile(absl::StrCat("/proc/", process.pid, "/io"));
      io.ok()) {
    sample.io_bytes += ParseIoCharBytes(*io);
  }
}

}  // namespace

std::map<pid_t, ProcessGroupSample> SampleProcessGroups(const std::vector<pid_t>& pgids) {
  std::map<pid_t, ProcessGroupSample> groups;
  if (pgids.empty()) return groups;
  for (const ProcessEntry& process : ScanProcesses()) {
    if (std::find(pgids.begin(), pgids.end(), process.activity.pgrp) == pgids.end()) continue;
    AddToSample(process, groups[process.activity.pgrp]);
  }
  return groups;
}

std::map<pid_t, ProcessGroupSample> SampleProcessTrees(const std::vector<pid_t>& roots) {
  std::map<pid_t, ProcessGroupSample> trees;
  if (roots.empty()) return trees;
  const std::vector<ProcessEntry> processes = ScanProcesses();
  const std::map<pid_t, pid_t> root_of = RootsOf(processes, roots);
  for (const ProcessEntry& process : processes) {
    auto root = root_of.find(process.pid);
    if (root != root_of.end()) AddToSample(process, trees[root->second]);
  }
  return trees;
}

std::vector<pid_t> ProcessTree(pid_t root) {
  const std::vector<ProcessEntry> processes = ScanProcesses();
  const std::map<pid_t, pid_t> root_of = RootsOf(processes, {root});
  std::vector<pid_t> tree;
  if (root_of.count(root) == 0) return tree;
  tree.push_back(root);
  for (const auto& [pid, unused_root] : root_of) {
    if (pid != root) tree.push_back(pid);
  }
  return tree;
}

absl::StatusOr<int64_t> ReadProcessRssBytes(pid_t pid) {
  DDP_ASSIGN_OR_RETURN(std::string status, ReadFile(absl::StrCat("/proc/", pid, "/status")));
  return ParseStatusRssBytes(status);
}

MachineInfo ReadMachineInfo() {
  MachineInfo info;
  info.cpus = static_cast<int>(std::thread::hardware_concurrency());
  absl::StatusOr<std::string> cpuinfo = ReadFile("/proc/cpuinfo");
  info.cpu_model = cpuinfo.ok() ? ParseCpuModel(*cpuinfo) : "unknown";
  return info;
}

int64_t RaiseOpenFileLimit() {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  return static_cast<int64_t>(limit.rlim_cur);
}

}  // namespace ddp
