#include "client/stack_dump.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/worker_process.h"
#include "common/proc_stats.h"

namespace ddp::client {
namespace {

constexpr size_t kMaxHeaderBytes = 256;

// What /proc/<pid>/stat says: the state letter and the process group.
struct ProcStat {
  char state = '?';
  pid_t pgrp = -1;
};

bool ReadProcStat(pid_t pid, ProcStat* out) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return false;
  // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::vector<std::string> fields = absl::StrSplit(line.substr(close + 1), ' ', absl::SkipEmpty());
  if (fields.size() < 3 || fields[0].size() != 1) return false;
  int pgrp = -1;
  if (!absl::SimpleAtoi(fields[2], &pgrp)) return false;
  out->state = fields[0][0];
  out->pgrp = pgrp;
  return true;
}

std::string ReadHead(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(kMaxHeaderBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

// -1 when the file cannot be read.
off_t FileSize(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return -1;
  return st.st_size;
}

std::string ReadRange(const std::string& path, off_t from, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(from);
  std::string text(max_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// One target's progress through CollectStackDumps.
struct Pending {
  off_t start = 0;      // the file's size before the signal
  off_t last_size = 0;  // at the last poll
  absl::Time last_growth;
  bool waiting = false;  // signalled, dump not complete yet
};

// Checks that `target` registered and can run its handler; returns the
// process to signal.
absl::StatusOr<pid_t> SignalTarget(const StackDumpTarget& target) {
  ProcStat worker;
  if (target.pid <= 0 || !ReadProcStat(target.pid, &worker) || worker.state == 'Z' ||
      worker.state == 'X') {
    return absl::NotFoundError(absl::StrCat("worker process ", target.pid, " is gone"));
  }
  const pid_t registered = RegisteredStackDumpPid(ReadHead(target.dump_file));
  if (registered < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no stack dump handler registered in ", target.dump_file,
                     " (not a Python worker, or started without the agent's sitecustomize.py)"));
  }
  ProcStat process = worker;
  if (registered != target.pid) {
    // A launcher script that runs Python: the interpreter descends from the
    // worker, or is in the group the worker leads. (In an interactive run
    // the workers share one group: descent tells whose it is.)
    const std::vector<pid_t> tree = ProcessTree(target.pid);
    const bool descends = std::find(tree.begin(), tree.end(), registered) != tree.end();
    if (!ReadProcStat(registered, &process) || (!descends && process.pgrp != target.pid)) {
      return absl::FailedPreconditionError(
          absl::StrCat("the stack dump handler in ", target.dump_file,
                       " was registered by process ", registered, ", which is not worker ",
                       target.pid, " nor one of its descendants or its process group"));
    }
  }
  if (process.state == 'T' || process.state == 't') {
    return absl::FailedPreconditionError(
        absl::StrCat("process ", registered, " is stopped (state ", std::string(1, process.state),
                     "): it cannot write its stack until it is continued"));
  }
  return registered;
}

std::string Capped(std::string text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = text.rfind('\n', max_bytes);
  cut = cut == std::string::npos ? max_bytes : cut + 1;
  text.resize(cut);
  absl::StrAppend(&text, "... (cut at ", max_bytes, " bytes)\n");
  return text;
}

}  // namespace

pid_t RegisteredStackDumpPid(const std::string& file_text) {
  const std::string line = file_text.substr(0, file_text.find('\n'));
  if (line.size() == file_text.size()) return -1;  // no complete line
  absl::string_view rest = line;
  if (!absl::ConsumePrefix(&rest, "ddp-stack-dump pid=")) return -1;
  const size_t space = rest.find(' ');
  if (space == absl::string_view::npos) return -1;
  int pid = -1;
  int signal_number = -1;
  if (!absl::SimpleAtoi(rest.substr(0, space), &pid) || pid <= 0) return -1;
  absl::string_view tail = rest.substr(space + 1);
  if (!absl::ConsumePrefix(&tail, "signal=") || !absl::SimpleAtoi(tail, &signal_number) ||
      signal_number != kStackDumpSignal) {
    return -1;
  }
  return pid;
}

std::vector<StackDump> CollectStackDumps(const std::vector<StackDumpTarget>& targets,
                                         const StackDumpOptions& options, const Clock& clock) {
  std::vector<StackDump> dumps(targets.size());
  std::vector<Pending> pending(targets.size());
  const absl::Time start = clock.Now();
  for (size_t i = 0; i < targets.size(); ++i) {
    const StackDumpTarget& target = targets[i];
    StackDump& dump = dumps[i];
    dump.local_rank = target.local_rank;
    dump.global_rank = target.global_rank;
    dump.pid = target.pid;
    absl::StatusOr<pid_t> process = SignalTarget(target);
    if (!process.ok()) {
      dump.status = process.status();
      continue;
    }
    dump.pid = *process;
    pending[i].start = FileSize(target.dump_file);
    pending[i].last_size = pending[i].start;
    pending[i].last_growth = start;
    if (kill(*process, kStackDumpSignal) != 0) {
      dump.status = absl::NotFoundError(
          absl::StrCat("cannot signal process ", *process, ": ", strerror(errno)));
      continue;
    }
    pending[i].waiting = true;
  }
  const absl::Time deadline = start + options.timeout;
  while (true) {
    bool any = false;
    const absl::Time now = clock.Now();
    for (size_t i = 0; i < targets.size(); ++i) {
      Pending& p = pending[i];
      if (!p.waiting) continue;
      const off_t size = FileSize(targets[i].dump_file);
      if (size != p.last_size) {
        p.last_size = size;
        p.last_growth = now;
      } else if (size > p.start && now - p.last_growth >= options.settle) {
        p.waiting = false;
        dumps[i].text =
            Capped(ReadRange(targets[i].dump_file, p.start, static_cast<size_t>(size - p.start)),
                   options.max_bytes);
        continue;
      }
      if (now >= deadline) {
        p.waiting = false;
        dumps[i].status = absl::DeadlineExceededError(absl::StrCat(
            "process ", dumps[i].pid, " wrote no stack within ",
            absl::FormatDuration(options.timeout), " of ", SignalName(kStackDumpSignal),
            " (its handler replaced by the script's own, or signals blocked)"));
        continue;
      }
      any = true;
    }
    if (!any) break;
    absl::SleepFor(options.poll_interval);
  }
  return dumps;
}

}  // namespace ddp::client
