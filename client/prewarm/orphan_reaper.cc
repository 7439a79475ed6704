#include "client/prewarm/orphan_reaper.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ddp::client {
namespace {

// The pids of this process's children, every thread's (/proc/self/task/*/
// children: an adopted orphan is the child of one live thread, the main one
// first).
std::vector<pid_t> Children() {
  std::vector<pid_t> pids;
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return pids;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream in(absl::StrCat("/proc/self/task/", entry->d_name, "/children"));
    pid_t pid;
    while (in >> pid) pids.push_back(pid);
  }
  closedir(tasks);
  return pids;
}

// A zombie that no one in this process waits for by pid (see the header).
bool IsOrphanZombie(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string stat = text.str();
  // "pid (comm) state ppid pgrp session ...": comm may hold anything but
  // ends at the last ')'.
  const size_t end = stat.rfind(')');
  if (end == std::string::npos) return false;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(end + 1), ' ', absl::SkipEmpty());
  pid_t pgrp = 0, session = 0;
  if (fields.size() < 4 || fields[0] != "Z" || !absl::SimpleAtoi(fields[2], &pgrp) ||
      !absl::SimpleAtoi(fields[3], &session)) {
    return false;
  }
  return pid != pgrp || pid == session;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OrphanReaper>> OrphanReaper::Create(OrphanReaperOptions options) {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    return absl::InternalError(absl::StrCat("prctl(PR_SET_CHILD_SUBREAPER): ", strerror(errno)));
  }
  std::unique_ptr<OrphanReaper> reaper(new OrphanReaper(options));
  OrphanReaper* raw = reaper.get();
  reaper->thread_ = std::thread([raw] { raw->Loop(); });
  return reaper;
}

OrphanReaper::OrphanReaper(OrphanReaperOptions options) : options_(options) {}

OrphanReaper::~OrphanReaper() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  if (thread_.joinable()) thread_.join();
  ReapOnce();
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

int OrphanReaper::ReapOnce() { return ReapPass().reaped; }

OrphanReaper::Pass OrphanReaper::ReapPass() {
  Pass pass;
  // Cheap first: is any child a zombie at all?
  siginfo_t info;
  memset(&info, 0, sizeof(info));
  if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return pass;
  pass.zombies = true;
  for (pid_t pid : Children()) {
    if (IsOrphanZombie(pid) && waitpid(pid, nullptr, WNOHANG) == pid) ++pass.reaped;
  }
  if (pass.reaped > 0) {
    absl::MutexLock lock(&mu_);
    reaped_ += pass.reaped;
  }
  return pass;
}

int OrphanReaper::reaped() const {
  absl::MutexLock lock(&mu_);
  return reaped_;
}

void OrphanReaper::Loop() {
  pthread_setname_np(pthread_self(), "orphan-reaper");
  absl::Duration interval = options_.poll_interval;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&quit_), interval)) return;
    }
    const Pass pass = ReapPass();
    // Only zombies to leave: their /proc files need not be read every poll.
    interval = pass.zombies && pass.reaped == 0
                   ? std::min(interval * 2, std::max(options_.max_poll_interval, interval))
                   : options_.poll_interval;
  }
}

}  // namespace ddp::client
