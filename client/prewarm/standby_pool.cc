#include "client/prewarm/standby_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/prewarm/listener_probe.h"
#include "client/prewarm/standby_site.h"
#include "client/worker_files.h"
#include "common/logging.h"

namespace ddp::client {
namespace {

constexpr size_t kMaxNamesInReason = 5;
constexpr size_t kMaxInbox = 8 << 10;  // one status line, bounded
constexpr int kSendBuffer = 1 << 20;   // the start message fits without waiting
constexpr absl::Duration kMaxIdlePoll = absl::Seconds(1);
// How long Launch waits for a standby still importing before it starts cold.
constexpr absl::Duration kMaxImportWait = absl::Minutes(2);
// Standbys of a rank that may die in a row (killed, no import error) before
// the rank starts cold for good; zygotes likewise, before standbys per rank.
constexpr int kMaxDeaths = 3;
// How long the zygote may take to answer a fork request (a fork, two
// in fact, and a re-parenting: milliseconds).
constexpr absl::Duration kZygoteReplyTimeout = absl::Seconds(10);
constexpr int kZygoteSendBuffer = 4 << 20;  // one request (an environment)

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

std::string Key(const std::vector<std::string>& argv, const EnvMap& static_env) {
  return absl::StrCat(absl::StrJoin(argv, std::string(1, '\0')), std::string(2, '\0'),
                      EncodeStartMessage(static_env));
}

// The names that differ between two environments (never their values).
std::string ChangedNames(const EnvMap& a, const EnvMap& b) {
  std::vector<std::string> names;
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    if (it == b.end() || it->second != value) names.push_back(key);
  }
  for (const auto& [key, value] : b) {
    if (a.count(key) == 0) names.push_back(key);
  }
  std::sort(names.begin(), names.end());
  const size_t more = names.size() > kMaxNamesInReason ? names.size() - kMaxNamesInReason : 0;
  names.resize(names.size() - more);
  return absl::StrCat(absl::StrJoin(names, ", "),
                      more > 0 ? absl::StrCat(" and ", more, " more") : "");
}

// glibc 2.36's <sys/pidfd.h> lacks extern "C" guards (see worker_process.cc).
int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// The parent of `pid` (/proc/PID/stat's fourth field); -1 when unreadable.
pid_t ParentOf(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string stat = text.str();
  const size_t end = stat.rfind(')');
  pid_t parent = -1;
  if (end == std::string::npos) return -1;
  std::istringstream fields(stat.substr(end + 1));
  std::string state;
  fields >> state >> parent;
  return fields ? parent : -1;
}

// Sends `message` as one datagram with `fds` (SCM_RIGHTS).
bool SendWithDescriptors(int socket, const std::string& message, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(message.data()), message.size()};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()), 0);
  msghdr header{};
  header.msg_iov = &iov;
  header.msg_iovlen = 1;
  header.msg_control = control.data();
  header.msg_controllen = control.size();
  cmsghdr* cmsg = CMSG_FIRSTHDR(&header);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  while (true) {
    const ssize_t n = sendmsg(socket, &header, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(message.size())) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{socket, POLLOUT, 0};
      if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(kZygoteReplyTimeout))) > 0) {
        continue;
      }
    }
    return false;
  }
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(kMaxImportWait))) <= 0) {
        return false;
      }
    } else if (!(n < 0 && errno == EINTR)) {
      return false;
    }
  }
  return true;
}

}  // namespace

struct StandbyPool::Standby {
  int local_rank = 0;
  std::vector<std::string> argv;
  EnvMap static_env;
  WorkerStdio stdio;
  SpawnedWorker process;
  int socket = -1;
  std::string inbox;    // what the standby said, up to a newline
  bool ready = false;   // said "ready"
  bool gone = false;    // EOF or "error": it will not serve
  std::string failure;  // its "error ..." line
  absl::Time started;
  bool idle_at_start = false;  // made at SCHED_IDLE (a refill)
  bool idle = false;           // at SCHED_IDLE still (not promoted nor handed over)
  bool forked = false;         // by the zygote (it imported nothing itself)

  // Reads what the standby said (non-blocking); true when something changed.
  bool Read() {
    bool changed = false;
    char buffer[1024];
    while (!gone) {
      const ssize_t n = read(socket, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      if (n <= 0) {
        gone = changed = true;
        break;
      }
      inbox.append(buffer, static_cast<size_t>(n));
      size_t newline;
      while ((newline = inbox.find('\n')) != std::string::npos) {
        const std::string line = inbox.substr(0, newline);
        inbox.erase(0, newline + 1);
        changed = true;
        if (absl::StartsWith(line, "ready")) {
          ready = true;
        } else {
          failure = line.substr(0, 1000);
          gone = true;
        }
      }
      if (inbox.size() > kMaxInbox) gone = changed = true;  // not our standby talking
    }
    return changed;
  }
};

bool IsWarmableCommand(const std::vector<std::string>& argv, const std::string& python_exec) {
  return argv.size() >= 3 && argv[0] == python_exec && argv[1] == "-u";
}

std::string EncodeStartMessage(const EnvMap& env) {
  std::string message;
  for (const auto& [key, value] : env) {
    absl::StrAppend(&message, key, "=", value, std::string(1, '\0'));
  }
  message.push_back('\0');  // the end: a message cut short is never taken for one
  return message;
}

std::string StandbyPool::ModulesToImport() const {
  std::string modules = absl::StrJoin(options_.modules, ",");
  for (const std::string& optional : options_.optional_modules) {
    absl::StrAppend(&modules, ",?", optional);  // sitecustomize.py: skipped if it fails
  }
  return modules;
}

absl::StatusOr<std::unique_ptr<StandbyPool>> StandbyPool::Create(StandbyPoolOptions options,
                                                                 const Clock& clock) {
  if (options.modules.empty()) return absl::InvalidArgumentError("--prewarm names no module");
  if (absl::Status s = MakeDirectories(options.site_dir); !s.ok()) return s;
  const std::string file = absl::StrCat(options.site_dir, "/sitecustomize.py");
  {
    std::ofstream out(file, std::ios::trunc);
    out << StandbySiteSource();
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", file));
  }
  if (options.zygote && (options.zygote_stdout_fd < 0 || options.zygote_stderr_fd < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the zygote's stdout and stderr must be open descriptors, not ",
                     options.zygote_stdout_fd, " and ", options.zygote_stderr_fd));
  }
  std::unique_ptr<StandbyPool> pool(new StandbyPool(std::move(options), clock));
  if (pool->wake_fd_ < 0) {
    return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
  }
  if (pool->options_.zygote) {
    absl::StatusOr<std::unique_ptr<OrphanReaper>> reaper = OrphanReaper::Create();
    if (reaper.ok()) {
      pool->reaper_ = std::move(*reaper);
    } else {
      DDP_LOG(WARNING) << "--prewarm: no zygote (" << reaper.status()
                       << "); each rank's standby imports on its own";
      absl::MutexLock lock(&pool->mu_);
      pool->zygote_off_ = true;
    }
  }
  StandbyPool* raw = pool.get();
  pool->thread_ = std::thread([raw] { raw->Loop(); });
  return pool;
}

StandbyPool::StandbyPool(StandbyPoolOptions options, const Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

StandbyPool::~StandbyPool() {
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();  // its end kills the standbys (PR_SET_PDEATHSIG)
  {
    absl::MutexLock lock(&mu_);
    for (auto& [rank, standby] : standbys_) RetireLocked(std::move(standby));
    RetireLocked(std::move(zygote_));
    for (auto& standby : retired_) {
      SignalProcessGroup(standby->process.pid, SIGKILL);
      if (standby->process.pid > 0) waitpid(standby->process.pid, nullptr, 0);
      CloseFd(standby->process.pidfd);
      CloseFd(standby->process.stdout_fd);
      CloseFd(standby->process.stderr_fd);
      CloseFd(standby->socket);
    }
    for (int& fd : closing_) CloseFd(fd);
    CloseFd(wake_fd_);
  }
  reaper_.reset();  // after the standbys: they are its adopted children
}

void StandbyPool::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void StandbyPool::Prepare(const WorkerSpec& spec, const WorkerStdio& stdio, absl::Duration delay) {
  PrepareStandby(spec, stdio, delay, /*idle=*/false);
}

void StandbyPool::PrepareStandby(const WorkerSpec& spec, const WorkerStdio& stdio,
                                 absl::Duration delay, bool idle, absl::Duration fork_delay) {
  if (!IsWarmableCommand(spec.argv, options_.python_exec)) {
    DDP_LOG(INFO) << "--prewarm: local rank " << spec.local_rank << " has no standby: its "
                  << "command is not `" << options_.python_exec << " -u ...` (--no-python or an "
                  << "executable entry point); it starts cold";
    return;
  }
  const absl::Time now = clock_.Now();
  Request request{spec.argv, StaticPart(spec.env), stdio, now + delay, idle,
                  now + fork_delay};
  {
    absl::MutexLock lock(&mu_);
    auto failed = failed_.find(spec.local_rank);
    if (failed != failed_.end() && failed->second == Key(request.argv, request.static_env)) return;
    requests_[spec.local_rank] = std::move(request);
  }
  Wake();
}

std::string StandbyPool::Mismatch(const Standby& standby, const WorkerSpec& spec,
                                  const WorkerStdio& stdio) const {
  if (standby.argv != spec.argv) return "its command line changed";
  if (standby.stdio.stdout_target != stdio.stdout_target ||
      standby.stdio.stderr_target != stdio.stderr_target) {
    return "its output goes elsewhere now";
  }
  EnvMap static_env = StaticPart(spec.env);
  if (standby.static_env != static_env) {
    return absl::StrCat("its static environment changed (",
                        ChangedNames(standby.static_env, static_env), ")");
  }
  return "";
}

absl::StatusOr<SpawnedWorker> StandbyPool::Launch(const WorkerSpec& spec,
                                                  const WorkerStdio& stdio) {
  std::unique_ptr<Standby> standby;
  std::string reason;
  const bool warmable = IsWarmableCommand(spec.argv, options_.python_exec);
  {
    absl::MutexLock lock(&mu_);
    // Its standby is still to be forked by a zygote that imports now: wait
    // for it, as for a standby that imports (a cold start would import from
    // scratch), with the zygote at normal priority from here.
    auto awaits_zygote = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (standbys_.count(spec.local_rank) > 0) return false;
      if (forking_.count(spec.local_rank) > 0) return true;
      // Waiting for a zygote's import, or due and about to get one.
      auto request = requests_.find(spec.local_rank);
      return request != requests_.end() && ForZygoteLocked(request->second) &&
             (ZygoteServesLocked(request->second) || request->second.due <= clock_.Now());
    };
    if (warmable && awaits_zygote()) {
      if (zygote_ != nullptr && zygote_->idle) {
        zygote_->idle = false;
        if (absl::Status raised = RestoreNormalCpuPriority(zygote_->process.pid); !raised.ok()) {
          DDP_LOG(WARNING) << "--prewarm: the zygote: " << raised;
        }
      }
      auto forked = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !awaits_zygote(); };
      mu_.AwaitWithTimeout(absl::Condition(&forked), kMaxImportWait);
    }
    auto it = standbys_.find(spec.local_rank);
    if (!warmable) {
      reason = "its command is not a Python one";
    } else if (it == standbys_.end()) {
      auto failed = failed_.find(spec.local_rank);
      reason = failed != failed_.end() ? "its standby could not import (logged before)"
                                       : "no standby is prepared for it yet";
    } else if (it->second->gone) {
      reason = "its standby ended";
      RetireLocked(std::move(it->second));
      standbys_.erase(it);
    } else if (reason = Mismatch(*it->second, spec, stdio); !reason.empty()) {
      RetireLocked(std::move(it->second));
      standbys_.erase(it);
    } else {
      standby = std::move(it->second);
      standbys_.erase(it);
    }
  }
  if (standby != nullptr && standby->idle) {
    // From here it is the worker: never at idle priority.
    if (absl::Status raised = RestoreNormalCpuPriority(standby->process.pid); !raised.ok()) {
      reason = absl::StrCat("its CPU priority cannot be restored: ", raised.message());
      SignalProcessGroup(standby->process.pid, SIGKILL);
      absl::MutexLock lock(&mu_);
      RetireLocked(std::move(standby));
    }
  }
  if (standby != nullptr) {
    // Still importing: wait for it (a cold start would import from scratch).
    const absl::Time deadline = clock_.Now() + kMaxImportWait;
    while (!standby->ready && !standby->gone && clock_.Now() < deadline) {
      pollfd p{standby->socket, POLLIN, 0};
      poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(deadline - clock_.Now())) + 1);
      standby->Read();
    }
    if (standby->ready && !standby->gone && spec.await_master) AwaitMaster(spec);
    // Still there? (A standby that dies after this is a worker that died at
    // its start: reported as such.)
    standby->Read();
    pollfd exited{standby->process.pidfd, POLLIN, 0};
    if (poll(&exited, 1, 0) == 1) standby->gone = true;
    if (standby->ready && !standby->gone &&
        SendAll(standby->socket, EncodeStartMessage(spec.env)) &&
        shutdown(standby->socket, SHUT_WR) == 0) {
      const SpawnedWorker process = standby->process;
      DDP_LOG(INFO) << "--prewarm: local rank " << spec.local_rank << " starts warm (pid "
                    << process.pid << ")";
      {
        absl::MutexLock lock(&mu_);
        ++counts_.warm_starts;
        deaths_.erase(spec.local_rank);
        closing_.push_back(standby->socket);  // the pool's thread closes it
      }
      standby->socket = -1;
      PrepareStandby(spec, stdio, options_.refill_delay, options_.idle_cpu_priority,
                     options_.zygote_refill_delay);
      return process;
    }
    reason = standby->failure.empty() ? "its standby ended or did not become ready"
                                      : absl::StrCat("its standby failed: ", standby->failure);
    // It may hold part (or all) of a start message: it must never run.
    SignalProcessGroup(standby->process.pid, SIGKILL);
    absl::MutexLock lock(&mu_);
    RetireLocked(std::move(standby));
  }
  DDP_LOG(INFO) << "--prewarm: local rank " << spec.local_rank << " starts cold: " << reason;
  absl::StatusOr<SpawnedWorker> process = SpawnWorker(spec.argv, ToEnvStrings(spec.env), stdio);
  {
    absl::MutexLock lock(&mu_);
    ++counts_.cold_starts;
  }
  if (warmable) {
    PrepareStandby(spec, stdio, options_.refill_delay, options_.idle_cpu_priority,
                   options_.zygote_refill_delay);
  }
  return process;
}

void StandbyPool::AwaitMaster(const WorkerSpec& spec) {
  auto rank = spec.env.find("RANK");
  auto addr = spec.env.find("MASTER_ADDR");
  auto port_text = spec.env.find("MASTER_PORT");
  int port = 0;
  if (rank == spec.env.end() || rank->second == "0" || addr == spec.env.end() ||
      port_text == spec.env.end() || !absl::SimpleAtoi(port_text->second, &port)) {
    return;
  }
  // Once per generation at most: a script with no store at MASTER_PORT must
  // not cost every rank the whole wait.
  const std::string master = absl::StrCat(addr->second, ":", port);
  {
    absl::MutexLock lock(&mu_);
    if (master == master_not_listening_) return;
  }
  const absl::Time started = clock_.Now();
  const bool listening = AwaitListener(addr->second, port, options_.master_wait);
  DDP_LOG(DEBUG) << "--prewarm: local rank " << spec.local_rank << ": " << master
                 << (listening ? " listens" : " does not listen") << " after "
                 << absl::FormatDuration(clock_.Now() - started);
  if (!listening) {
    absl::MutexLock lock(&mu_);
    master_not_listening_ = master;
  }
}

void StandbyPool::RetireLocked(std::unique_ptr<Standby> standby) {
  if (standby == nullptr) return;
  if (standby->socket >= 0) shutdown(standby->socket, SHUT_RDWR);  // EOF: it exits 0
  retired_.push_back(std::move(standby));
  Wake();
}

bool StandbyPool::AwaitReady(const std::vector<int>& local_ranks, absl::Duration timeout) {
  auto all_ready = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (int rank : local_ranks) {
      auto it = standbys_.find(rank);
      if (it == standbys_.end() || !it->second->ready || it->second->gone) return false;
    }
    return true;
  };
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&all_ready), timeout);
}

StandbyPool::Counts StandbyPool::counts() const {
  absl::MutexLock lock(&mu_);
  Counts counts = counts_;
  counts.standbys_ready = 0;
  for (const auto& [rank, standby] : standbys_) {
    if (standby->ready && !standby->gone) ++counts.standbys_ready;
  }
  return counts;
}

pid_t StandbyPool::ZygotePid() const {
  absl::MutexLock lock(&mu_);
  return zygote_ != nullptr ? zygote_->process.pid : -1;
}

std::map<int, pid_t> StandbyPool::StandbyPids() const {
  absl::MutexLock lock(&mu_);
  std::map<int, pid_t> pids;
  for (const auto& [rank, standby] : standbys_) pids[rank] = standby->process.pid;
  return pids;
}

void StandbyPool::Loop() {
  pthread_setname_np(pthread_self(), "standby-pool");
  while (true) {
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
    absl::Duration wait = kMaxIdlePoll;
    {
      absl::MutexLock lock(&mu_);
      if (quit_) return;
      for (int& fd : closing_) CloseFd(fd);
      closing_.clear();
      for (const auto& [rank, standby] : standbys_) {
        if (!standby->gone) fds.push_back({standby->socket, POLLIN, 0});
      }
      if (zygote_ != nullptr && !zygote_->gone) fds.push_back({zygote_->socket, POLLIN, 0});
      for (const auto& standby : retired_) fds.push_back({standby->process.pidfd, POLLIN, 0});
      const absl::Time now = clock_.Now();
      for (const auto& [rank, request] : requests_) {
        // Waiting for its zygote's import: woken by the zygote's "ready".
        const bool zygote_serves = ForZygoteLocked(request) && ZygoteServesLocked(request);
        if (zygote_serves && !zygote_->ready) continue;
        const absl::Time due = zygote_serves ? request.fork_due : request.due;
        wait = std::min(wait, std::max(absl::ZeroDuration(), due - now));
      }
      auto promotion = [&](const Standby& standby) {
        if (standby.idle && !standby.ready && !standby.gone) {
          const absl::Time promote = standby.started + options_.idle_import_limit;
          wait = std::min(wait, std::max(absl::ZeroDuration(), promote - now));
        }
      };
      for (const auto& [rank, standby] : standbys_) promotion(*standby);
      if (zygote_ != nullptr) promotion(*zygote_);
    }
    poll(fds.data(), fds.size(), static_cast<int>(absl::ToInt64Milliseconds(wait)) + 1);
    uint64_t count;
    (void)!read(wake_fd_, &count, sizeof(count));
    ReadMessages();
    PromoteSlowImports();
    ReapRetired();
    StartDue();
  }
}

void StandbyPool::PromoteSlowImports() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_.Now();
  auto promote = [&](Standby& standby, const std::string& who) {
    if (!standby.idle || standby.ready || standby.gone) return;
    if (now < standby.started + options_.idle_import_limit) return;
    // The CPU is busy (idle priority got next to nothing): import at normal
    // priority now, as a standby made after refill_delay would.
    standby.idle = false;
    if (absl::Status raised = RestoreNormalCpuPriority(standby.process.pid); !raised.ok()) {
      DDP_LOG(WARNING) << "--prewarm: " << who << ": " << raised;
    } else {
      DDP_LOG(INFO) << "--prewarm: " << who << " still importing after "
                    << absl::FormatDuration(options_.idle_import_limit)
                    << " at idle priority; it goes on at normal priority";
    }
  };
  for (auto& [rank, standby] : standbys_) {
    promote(*standby, absl::StrCat("local rank ", rank, ": standby"));
  }
  if (zygote_ != nullptr) promote(*zygote_, "the zygote");
}

bool StandbyPool::ForZygoteLocked(const Request& request) const {
  return options_.zygote && !zygote_off_ &&
         zygote_failed_ != Key(request.argv, NodePart(request.static_env));
}

bool StandbyPool::ZygoteServesLocked(const Request& request) const {
  return zygote_ != nullptr && !zygote_->gone && zygote_->argv == request.argv &&
         zygote_->static_env == NodePart(request.static_env);
}

void StandbyPool::ReadZygoteLocked() {
  Standby& zygote = *zygote_;
  if (zygote.gone || !zygote.Read()) return;
  const absl::Duration age = absl::Trunc(clock_.Now() - zygote.started, absl::Milliseconds(10));
  if (zygote.ready && !zygote.gone) {
    DDP_LOG(INFO) << "--prewarm: the zygote (pid " << zygote.process.pid << ") imported "
                  << absl::StrJoin(options_.modules, ",") << " in " << absl::FormatDuration(age)
                  << "; it forks each local rank's standby";
    return;
  }
  if (!zygote.failure.empty()) {
    // Perhaps a module that needs a rank's own variables at import: each
    // rank's standby may still import it with them.
    zygote_failed_ = Key(zygote.argv, zygote.static_env);
    DDP_LOG(WARNING) << "--prewarm: the zygote (pid " << zygote.process.pid
                     << ") failed: " << zygote.failure
                     << "; each rank's standby imports on its own for this command and "
                        "environment";
  } else {
    zygote_off_ = ++zygote_deaths_ >= kMaxDeaths;
    DDP_LOG(WARNING) << "--prewarm: the zygote (pid " << zygote.process.pid << ") ended after "
                     << absl::FormatDuration(age)
                     << (zygote_off_ ? "; each rank's standby imports on its own from now on"
                                     : "; a new one is started for the next standby");
  }
  RetireLocked(std::move(zygote_));
}

void StandbyPool::ReadMessages() {
  absl::MutexLock lock(&mu_);
  if (zygote_ != nullptr) ReadZygoteLocked();
  for (auto it = standbys_.begin(); it != standbys_.end();) {
    Standby& standby = *it->second;
    if (standby.gone || !standby.Read()) {
      ++it;
      continue;
    }
    const absl::Duration age = clock_.Now() - standby.started;
    if (standby.ready && !standby.gone) {
      DDP_LOG(INFO) << "--prewarm: local rank " << standby.local_rank << ": standby (pid "
                    << standby.process.pid << ") "
                    << (standby.forked ? "forked by the zygote, ready in "
                                       : absl::StrCat("imported ",
                                                      absl::StrJoin(options_.modules, ","), " in "))
                    << absl::FormatDuration(absl::Trunc(age, absl::Milliseconds(1)))
                    << "; it waits for the next generation";
      ++it;
      continue;
    }
    if (!standby.gone) {
      ++it;
      continue;
    }
    // An import error is for good (until the command or environment
    // changes); a standby killed from outside (the OOM killer, an operator)
    // is replaced, kMaxDeaths times in a row at most.
    const int rank = standby.local_rank;
    const bool for_good = !standby.failure.empty() || ++deaths_[rank] >= kMaxDeaths;
    DDP_LOG(WARNING) << "--prewarm: local rank " << rank << ": standby (pid " << standby.process.pid
                     << ") ended before it was used" << (standby.failure.empty() ? "" : ": ")
                     << standby.failure
                     << (for_good ? "; this rank starts cold until its command or environment "
                                    "changes"
                         : standby.forked
                             ? "; a new one is forked"
                             : absl::StrCat("; a new one in ",
                                            absl::FormatDuration(options_.refill_delay)));
    if (for_good) {
      failed_[rank] = Key(standby.argv, standby.static_env);
    } else {
      requests_[rank] = Request{standby.argv, standby.static_env, standby.stdio,
                                clock_.Now() + options_.refill_delay, standby.idle_at_start,
                                clock_.Now()};
    }
    RetireLocked(std::move(it->second));
    it = standbys_.erase(it);
  }
}

void StandbyPool::ReapRetired() {
  absl::MutexLock lock(&mu_);
  for (auto it = retired_.begin(); it != retired_.end();) {
    Standby& standby = **it;
    if (waitpid(standby.process.pid, nullptr, WNOHANG) == 0) {
      ++it;
      continue;
    }
    CloseFd(standby.process.pidfd);
    CloseFd(standby.process.stdout_fd);
    CloseFd(standby.process.stderr_fd);
    CloseFd(standby.socket);
    it = retired_.erase(it);
  }
}

void StandbyPool::StartDue() {
  std::vector<std::pair<int, Request>> forks, alone;
  std::optional<Request> new_zygote;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_.Now();
    // The zygote is still wanted while a request waits for it; a request of
    // another argv or NodePart then gets a standby of its own (two such
    // keys at once never make zygotes replace each other in turn).
    bool zygote_wanted = false;
    for (const auto& [rank, request] : requests_) {
      zygote_wanted = zygote_wanted || ZygoteServesLocked(request);
    }
    std::string new_zygote_key;
    for (auto it = requests_.begin(); it != requests_.end();) {
      const Request& request = it->second;
      bool for_zygote = ForZygoteLocked(request);
      const bool serves = for_zygote && ZygoteServesLocked(request);
      const bool forkable = serves && zygote_->ready;
      // A ready zygote serves at its fork_due (a fork costs the workers
      // little, but not nothing: see zygote_refill_delay).
      if (forkable ? request.fork_due > now : request.due > now) {
        ++it;
        continue;
      }
      if (serves && !forkable) {  // waits for its zygote's import
        ++it;
        continue;
      }
      if (for_zygote && !serves) {
        const std::string key = Key(request.argv, NodePart(request.static_env));
        if (!new_zygote.has_value() && !zygote_wanted) {
          new_zygote = request;
          new_zygote_key = key;
        }
        if (key == new_zygote_key) {  // waits for the new zygote's import
          ++it;
          continue;
        }
        for_zygote = false;
      }
      auto current = standbys_.find(it->first);
      const bool same = current != standbys_.end() && !current->second->gone &&
                        current->second->argv == request.argv &&
                        current->second->static_env == request.static_env &&
                        current->second->stdio.stdout_target == request.stdio.stdout_target &&
                        current->second->stdio.stderr_target == request.stdio.stderr_target;
      if (!same && for_zygote) forking_.insert(it->first);
      if (!same) (for_zygote ? forks : alone).emplace_back(it->first, std::move(it->second));
      it = requests_.erase(it);
    }
  }
  if (new_zygote.has_value()) StartZygote(*new_zygote);
  for (auto& [rank, request] : forks) {
    absl::StatusOr<std::unique_ptr<Standby>> standby = ForkFromZygote(rank, request);
    if (!standby.ok()) {
      DDP_LOG(WARNING) << "--prewarm: local rank " << rank << ": no standby from the zygote ("
                       << standby.status().message() << "); it starts one of its own";
      StartAlone(rank, request);
    }
    absl::MutexLock lock(&mu_);
    forking_.erase(rank);  // a Launch waiting for it goes on
    if (!standby.ok()) continue;
    ++counts_.zygote_forks;
    zygote_deaths_ = 0;
    auto& slot = standbys_[rank];
    RetireLocked(std::move(slot));
    slot = std::move(*standby);
  }
  for (auto& [rank, request] : alone) StartAlone(rank, request);
}

EnvMap StandbyPool::StandbyEnvironment(const EnvMap& static_env) const {
  EnvMap env = static_env;
  auto path = env.find("PYTHONPATH");
  env["PYTHONPATH"] = path == env.end() || path->second.empty()
                          ? options_.site_dir
                          : absl::StrCat(options_.site_dir, ":", path->second);
  return env;
}

std::unique_ptr<StandbyPool::Standby> StandbyPool::NewStandby(int local_rank,
                                                              const Request& request) const {
  auto standby = std::make_unique<Standby>();
  standby->local_rank = local_rank;
  standby->argv = request.argv;
  standby->static_env = request.static_env;
  standby->stdio = request.stdio;
  standby->started = clock_.Now();
  standby->idle = standby->idle_at_start = request.idle;
  return standby;
}

void StandbyPool::StartAlone(int rank, const Request& request) {
  std::unique_ptr<Standby> standby = NewStandby(rank, request);
  EnvMap env = StandbyEnvironment(request.static_env);
  env["DDP_PREWARM_MODULES"] = ModulesToImport();
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) {
    DDP_LOG(WARNING) << "--prewarm: local rank " << rank << ": socketpair: " << strerror(errno);
    return;
  }
  setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &kSendBuffer, sizeof(kSendBuffer));
  // The child end is blocking: the standby reads it with plain os.read.
  fcntl(pair[1], F_SETFL, fcntl(pair[1], F_GETFL) & ~O_NONBLOCK);
  WorkerStdio stdio = request.stdio;
  stdio.control_fd = pair[1];
  stdio.idle_cpu_priority = request.idle;
  absl::StatusOr<SpawnedWorker> process = SpawnWorker(request.argv, ToEnvStrings(env), stdio);
  close(pair[1]);
  if (!process.ok() || !process->exec_error.empty()) {
    DDP_LOG(WARNING) << "--prewarm: local rank " << rank << ": cannot start a standby: "
                     << (process.ok() ? process->exec_error : process.status().ToString());
    close(pair[0]);
    absl::MutexLock lock(&mu_);
    failed_[rank] = Key(request.argv, request.static_env);
    if (process.ok()) {
      standby->process = *process;
      RetireLocked(std::move(standby));
    }
    return;
  }
  standby->process = *process;
  standby->socket = pair[0];
  DDP_LOG(DEBUG) << "--prewarm: local rank " << rank << ": standby pid " << process->pid
                 << " importing " << absl::StrJoin(options_.modules, ",");
  absl::MutexLock lock(&mu_);
  auto& slot = standbys_[rank];
  RetireLocked(std::move(slot));
  slot = std::move(standby);
}

void StandbyPool::StartZygote(const Request& request) {
  auto zygote = std::make_unique<Standby>();
  zygote->local_rank = -1;
  zygote->argv = request.argv;
  zygote->static_env = NodePart(request.static_env);
  zygote->started = clock_.Now();
  zygote->idle = zygote->idle_at_start = request.idle;
  zygote->stdio.stdout_target = options_.zygote_stdout_fd;
  zygote->stdio.stderr_target = options_.zygote_stderr_fd;
  EnvMap env = StandbyEnvironment(zygote->static_env);
  env["DDP_PREWARM_MODULES"] = ModulesToImport();
  env["DDP_PREWARM_ZYGOTE"] = "1";
  int pair[2] = {-1, -1};
  absl::StatusOr<SpawnedWorker> process = absl::InternalError("not started");
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) {
    process = absl::InternalError(absl::StrCat("socketpair: ", strerror(errno)));
    pair[0] = pair[1] = -1;
  } else {
    setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &kZygoteSendBuffer, sizeof(kZygoteSendBuffer));
    fcntl(pair[1], F_SETFL, fcntl(pair[1], F_GETFL) & ~O_NONBLOCK);
    WorkerStdio stdio = zygote->stdio;
    stdio.control_fd = pair[1];
    stdio.idle_cpu_priority = request.idle;
    process = SpawnWorker(request.argv, ToEnvStrings(env), stdio);
    CloseFd(pair[1]);
  }
  if (!process.ok() || !process->exec_error.empty()) {
    CloseFd(pair[0]);
    DDP_LOG(WARNING) << "--prewarm: cannot start a zygote ("
                     << (process.ok() ? process->exec_error : process.status().ToString())
                     << "); each rank's standby imports on its own";
    absl::MutexLock lock(&mu_);
    zygote_off_ = true;
    if (process.ok()) {
      zygote->process = *process;
      RetireLocked(std::move(zygote));
    }
    Wake();  // its waiting requests go on alone
    return;
  }
  zygote->process = *process;
  zygote->socket = pair[0];
  DDP_LOG(INFO) << "--prewarm: a zygote (pid " << process->pid << ") imports "
                << absl::StrJoin(options_.modules, ",")
                << "; it will fork each local rank's standby";
  absl::MutexLock lock(&mu_);
  RetireLocked(std::move(zygote_));
  zygote_ = std::move(zygote);
}

absl::StatusOr<std::unique_ptr<StandbyPool::Standby>> StandbyPool::ForkFromZygote(
    int rank, const Request& request) {
  int zygote_socket = -1;
  pid_t zygote_pid = -1;
  bool zygote_idle = false;
  {
    absl::MutexLock lock(&mu_);
    if (!ZygoteServesLocked(request) || !zygote_->ready) {
      return absl::UnavailableError("the zygote is gone");
    }
    zygote_socket = zygote_->socket;
    zygote_pid = zygote_->process.pid;
    zygote_idle = zygote_->idle;
  }
  // The standby's descriptors: its socket to this pool, stdout, stderr.
  int control[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {control, out, err}) {
      CloseFd(p[0]);
      CloseFd(p[1]);
    }
  };
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, control) != 0 ||
      (request.stdio.stdout_target < 0 && pipe2(out, O_CLOEXEC) != 0) ||
      (request.stdio.stderr_target < 0 && pipe2(err, O_CLOEXEC) != 0)) {
    const std::string error = strerror(errno);
    close_all();
    return absl::InternalError(absl::StrCat("socketpair or pipe2: ", error));
  }
  setsockopt(control[0], SOL_SOCKET, SO_SNDBUF, &kSendBuffer, sizeof(kSendBuffer));
  const std::vector<int> fds = {
      request.stdio.stdout_target >= 0 ? request.stdio.stdout_target : out[1],
      request.stdio.stderr_target >= 0 ? request.stdio.stderr_target : err[1], control[1]};
  const std::string message =
      absl::StrCat("fork ", request.idle ? "1" : "0", std::string(1, '\0'),
                   EncodeStartMessage(StandbyEnvironment(request.static_env)));
  const bool sent = SendWithDescriptors(zygote_socket, message, fds);
  const int send_errno = errno;
  CloseFd(control[1]);
  CloseFd(out[1]);
  CloseFd(err[1]);
  if (!sent) {
    close_all();
    if (send_errno == EMSGSIZE) {
      return absl::InternalError(absl::StrCat("its environment (", message.size(),
                                              " bytes) does not fit one request to the zygote"));
    }
    return absl::UnavailableError(absl::StrCat("cannot ask the zygote: ", strerror(send_errno)));
  }
  // Its answer: a real wait for a real process (not the injected clock, which
  // a test may hold still).
  std::string reply;
  pollfd answer{zygote_socket, POLLIN, 0};
  int polled;
  do {
    polled = poll(&answer, 1, static_cast<int>(absl::ToInt64Milliseconds(kZygoteReplyTimeout)));
  } while (polled < 0 && errno == EINTR);
  char buffer[256];
  const ssize_t n = polled == 1 ? recv(zygote_socket, buffer, sizeof(buffer), 0) : -1;
  if (n <= 0) {
    close_all();
    // Its socket's EOF (now, or once killed) retires it on the pool's
    // thread (ReadZygoteLocked).
    if (polled == 0) SignalProcessGroup(zygote_pid, SIGKILL);
    return absl::UnavailableError(polled == 0 ? "the zygote did not answer; it is killed"
                                              : "the zygote ended");
  }
  reply.assign(buffer, static_cast<size_t>(n));
  pid_t pid = 0;
  if (!absl::StartsWith(reply, "forked ") ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(reply.substr(7)), &pid) || pid <= 0) {
    close_all();
    return absl::InternalError(
        absl::StrCat("the zygote answered: ", absl::StripAsciiWhitespace(reply.substr(0, 200))));
  }
  // This process's child (the subreaper), or nothing the supervisor could
  // wait for: never used.
  if (const pid_t parent = ParentOf(pid); parent != getpid()) {
    kill(pid, SIGKILL);
    close_all();
    absl::MutexLock lock(&mu_);
    zygote_off_ = true;
    return absl::InternalError(absl::StrCat("the forked standby (pid ", pid,
                                            ") is not this process's child (its parent: ", parent,
                                            "); no zygote from now on"));
  }
  const int pidfd = PidfdOpen(pid);
  if (pidfd < 0) {
    const std::string error = strerror(errno);
    SignalProcessGroup(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close_all();
    return absl::InternalError(absl::StrCat("pidfd_open(", pid, "): ", error));
  }
  fcntl(pidfd, F_SETFD, FD_CLOEXEC);
  for (int fd : {out[0], err[0]}) {
    if (fd >= 0) fcntl(fd, F_SETFL, O_NONBLOCK);
  }
  std::unique_ptr<Standby> standby = NewStandby(rank, request);
  standby->idle = request.idle || zygote_idle;  // a fork keeps its zygote's policy
  standby->process.pid = pid;
  standby->process.pidfd = pidfd;
  standby->process.stdout_fd = out[0];
  standby->process.stderr_fd = err[0];
  standby->socket = control[0];
  standby->forked = true;
  DDP_LOG(DEBUG) << "--prewarm: local rank " << rank << ": standby pid " << pid
                 << " forked by the zygote";
  return standby;
}

}  // namespace ddp::client
