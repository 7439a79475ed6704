#ifndef DDP_TESTS_E2E_PROCESS_TABLE_H_
#define DDP_TESTS_E2E_PROCESS_TABLE_H_

// A snapshot of the Linux process table (/proc) for end-to-end tests: who is
// whose parent, which process group, which processes are zombies; and the
// sweep that kills and reaps everything a test started.
//
// Tests that kill an agent with SIGKILL make the test process a child
// subreaper (MakeSubreaper), so the orphans of its process tree are
// re-parented to the test and stay visible (and reapable) as its descendants.
//
// Thread-safety: free functions over a fresh read of /proc; no shared state.

#include <sys/types.h>

#include <map>
#include <set>
#include <string>

#include "absl/time/time.h"

namespace ddp::testing {

struct ProcessEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgid = 0;
  char state = '?';  // R, S, D, Z (zombie), T, ...
  std::string command;
};

// Every process readable in /proc, by pid. Processes that vanish while the
// table is read are left out.
std::map<pid_t, ProcessEntry> ReadProcessTable();

// The processes whose parent chain leads to `root` (root itself excluded).
std::set<pid_t> Descendants(const std::map<pid_t, ProcessEntry>& table, pid_t root);

// One line per pid: "pid ppid pgid state command", for failure messages.
std::string Describe(const std::map<pid_t, ProcessEntry>& table, const std::set<pid_t>& pids);

// True when `pid` is not in the process table at all (zombies count as
// present: nobody has reaped them).
bool AbsentFromProcessTable(pid_t pid);

// True when `pid` no longer runs: absent, or a zombie (reaped here when it is
// a child of the caller).
bool NoLongerRuns(pid_t pid);

// The value of environment variable `name` of process `pid` (from
// /proc/PID/environ); empty when unset or unreadable.
std::string EnvironmentOf(pid_t pid, const std::string& name);

// PR_SET_CHILD_SUBREAPER on the calling process. Returns false on failure.
bool MakeSubreaper();

// Waits up to `grace` for every descendant of the caller to end by itself,
// reaping the caller's children; returns Describe() of those still running
// (empty when none).
std::string AwaitDescendantsGone(absl::Duration grace);

// SIGKILLs every descendant of the caller (and the process groups they
// lead), reaps them, and repeats until none is left or `bound` passes.
// Returns the number of processes it had to kill.
int KillAndReapDescendants(absl::Duration bound);

}  // namespace ddp::testing

#endif  // DDP_TESTS_E2E_PROCESS_TABLE_H_
