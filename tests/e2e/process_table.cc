#include "tests/e2e/process_table.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/proc_stats.h"

namespace ddp::testing {
namespace {

// How often the sweep re-reads the table while processes die.
constexpr absl::Duration kSweepInterval = absl::Milliseconds(20);

}  // namespace

std::map<pid_t, ProcessEntry> ReadProcessTable() {
  std::map<pid_t, ProcessEntry> table;
  for (const ddp::ProcessEntry& process : ddp::ScanProcesses()) {
    table[process.pid] = ProcessEntry{process.pid, process.activity.ppid, process.activity.pgrp,
                                      process.activity.state, process.name};
  }
  return table;
}

std::set<pid_t> Descendants(const std::map<pid_t, ProcessEntry>& table, pid_t root) {
  std::set<pid_t> found;
  for (const auto& [pid, entry] : table) {
    // Walk up; the table is a snapshot, so bound the walk by its size.
    pid_t up = entry.ppid;
    for (size_t hops = 0; up > 0 && hops < table.size(); ++hops) {
      if (up == root) {
        found.insert(pid);
        break;
      }
      auto parent = table.find(up);
      if (parent == table.end()) break;
      up = parent->second.ppid;
    }
  }
  return found;
}

std::string Describe(const std::map<pid_t, ProcessEntry>& table, const std::set<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) {
    auto it = table.find(pid);
    if (it == table.end()) {
      absl::StrAppend(&out, pid, " (gone)\n");
      continue;
    }
    const ProcessEntry& e = it->second;
    absl::StrAppend(&out, e.pid, " ppid ", e.ppid, " pgid ", e.pgid, " ", std::string(1, e.state),
                    " ", e.command, "\n");
  }
  return out;
}

bool AbsentFromProcessTable(pid_t pid) { return !ddp::SampleProcess(pid).ok(); }

bool NoLongerRuns(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, WNOHANG);  // Reaps it if it is our zombie child.
  const absl::StatusOr<ddp::ProcessSample> sample = ddp::SampleProcess(pid);
  return !sample.ok() || sample->state == 'Z';
}

std::string EnvironmentOf(pid_t pid, const std::string& name) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/environ"));
  const std::string prefix = name + "=";
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    if (entry.compare(0, prefix.size(), prefix) == 0) {
      return entry.substr(prefix.size());
    }
  }
  return "";
}

bool MakeSubreaper() { return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0; }

std::string AwaitDescendantsGone(absl::Duration grace) {
  const pid_t self = getpid();
  const absl::Time deadline = absl::Now() + grace;
  while (true) {
    int status = 0;
    while (waitpid(-1, &status, WNOHANG) > 0) {
    }
    const std::map<pid_t, ProcessEntry> table = ReadProcessTable();
    std::set<pid_t> running;
    for (pid_t pid : Descendants(table, self)) {
      if (table.at(pid).state != 'Z') running.insert(pid);
    }
    if (running.empty()) return "";
    if (absl::Now() >= deadline) return Describe(table, running);
    absl::SleepFor(kSweepInterval);
  }
}

int KillAndReapDescendants(absl::Duration bound) {
  const pid_t self = getpid();
  const absl::Time deadline = absl::Now() + bound;
  std::set<pid_t> killed;
  while (true) {
    const std::map<pid_t, ProcessEntry> table = ReadProcessTable();
    bool alive = false;
    for (pid_t pid : Descendants(table, self)) {
      const ProcessEntry& entry = table.at(pid);
      if (entry.state == 'Z') continue;  // Dead; reaped below.
      alive = true;
      killed.insert(pid);
      if (entry.pgid == pid) kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
    }
    int status = 0;
    while (waitpid(-1, &status, WNOHANG) > 0) {
    }
    if (!alive || absl::Now() >= deadline) break;
    absl::SleepFor(kSweepInterval);
  }
  return static_cast<int>(killed.size());
}

}  // namespace ddp::testing
