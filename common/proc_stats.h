#ifndef DDP_COMMON_PROC_STATS_H_
#define DDP_COMMON_PROC_STATS_H_

// CPU time and resident memory of a process, read from /proc (Linux), and the
// machine description for the report.
//
// Possible errors: NOT_FOUND (no such process: /proc/PID missing),
// INVALID_ARGUMENT (the text does not have the expected format; the message
// quotes it, size-capped).
// Thread-safety: pure functions (they read /proc afresh each call).

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ddp {

// utime + stime of a /proc/PID/stat line (fields 14 and 15, counted after the
// parenthesised command name, which may itself hold spaces and parentheses).
absl::StatusOr<absl::Duration> ParseStatCpuTime(absl::string_view stat, int64_t ticks_per_second);
// VmRSS of a /proc/PID/status text, in bytes.
absl::StatusOr<int64_t> ParseStatusRssBytes(absl::string_view status);
// The first "model name" of a /proc/cpuinfo text; "unknown" if none.
std::string ParseCpuModel(absl::string_view cpuinfo);

// The thread or command name of a /proc/PID/stat line (inside the
// parentheses); empty if malformed.
std::string ParseStatName(absl::string_view stat);

// The scheduling state letter of a /proc/PID/stat line (field 3): R running,
// S sleeping, D uninterruptible wait, T stopped (SIGSTOP), t traced, Z zombie.
absl::StatusOr<char> ParseStatState(absl::string_view stat);

// A process's state and CPU time from one read of /proc/PID/stat.
struct ProcessSample {
  char state = '?';
  absl::Duration cpu;  // utime + stime
};
absl::StatusOr<ProcessSample> SampleProcess(pid_t pid);

absl::StatusOr<absl::Duration> ReadProcessCpuTime(pid_t pid);

// The fields of one /proc/PID/stat line that tell whether a process works:
// its parent (field 4), its process group (field 5), its state, and its CPU
// time with that of its reaped children (utime + stime + cutime + cstime,
// fields 14-17).
struct StatActivity {
  pid_t ppid = 0;
  pid_t pgrp = 0;
  char state = '?';
  absl::Duration cpu_with_children;
};
absl::StatusOr<StatActivity> ParseStatActivity(absl::string_view stat, int64_t ticks_per_second);
// One process of a /proc scan.
struct ProcessEntry {
  pid_t pid = 0;
  StatActivity activity;
  std::string name;  // the command name (ParseStatName)
};
// Every process's /proc/PID/stat now; those that end meanwhile are skipped.
std::vector<ProcessEntry> ScanProcesses();
// "read_bytes"/"rchar" and "wchar" of a /proc/PID/io text: bytes the process
// read and wrote through any syscall (files, sockets, pipes); 0 when absent.
int64_t ParseIoCharBytes(absl::string_view io);

// One process group (a worker and the children it keeps in its group:
// data-loader workers, the interpreter under a wrapper script) at one moment:
// how many processes, their CPU time together (reaped children's included
// through their parents), their read and written bytes together, and whether
// one of them is in uninterruptible wait (state D: disk or network file
// system I/O).
struct ProcessGroupSample {
  int processes = 0;
  absl::Duration cpu;
  int64_t io_bytes = 0;
  bool in_disk_wait = false;
};
// One scan of /proc for all of `pgids` (processes that vanish meanwhile are
// skipped). A group with no process left is absent from the result.
std::map<pid_t, ProcessGroupSample> SampleProcessGroups(const std::vector<pid_t>& pgids);
// The same for process trees: each of `roots` with its descendants (children,
// their children, ...; found by parent pid), whatever their process group:
// one worker's own processes when several workers share a group. A
// descendant orphaned by its parent's exit is reparented and no longer
// counted. One scan of /proc; a root that is gone is absent from the result.
std::map<pid_t, ProcessGroupSample> SampleProcessTrees(const std::vector<pid_t>& roots);
// `root` and its descendants now (one scan of /proc), root first; empty when
// `root` is gone.
std::vector<pid_t> ProcessTree(pid_t root);
// CPU time of every thread of `pid` (/proc/PID/task/*/stat), summed per
// thread name; threads that vanish while reading are skipped.
absl::StatusOr<std::map<std::string, absl::Duration>> ReadThreadCpuByName(pid_t pid);
// (name, share of one core) of the threads that used CPU between the two
// snapshots over `window`, busiest first, at most `limit` entries.
std::vector<std::pair<std::string, double>> BusiestThreads(
    const std::map<std::string, absl::Duration>& before,
    const std::map<std::string, absl::Duration>& after, absl::Duration window, size_t limit);
absl::StatusOr<int64_t> ReadProcessRssBytes(pid_t pid);

struct MachineInfo {
  int cpus = 0;
  std::string cpu_model;
};
MachineInfo ReadMachineInfo();

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
int64_t RaiseOpenFileLimit();

}  // namespace ddp

#endif  // DDP_COMMON_PROC_STATS_H_
