#include "client/prewarm/standby_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

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
// the rank starts cold for good.
constexpr int kMaxDeaths = 3;

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
  std::unique_ptr<StandbyPool> pool(new StandbyPool(std::move(options), clock));
  if (pool->wake_fd_ < 0) {
    return absl::InternalError(absl::StrCat("eventfd: ", strerror(errno)));
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
  absl::MutexLock lock(&mu_);
  for (auto& [rank, standby] : standbys_) RetireLocked(std::move(standby));
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

void StandbyPool::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void StandbyPool::Prepare(const WorkerSpec& spec, const WorkerStdio& stdio, absl::Duration delay) {
  PrepareStandby(spec, stdio, delay, /*idle=*/false);
}

void StandbyPool::PrepareStandby(const WorkerSpec& spec, const WorkerStdio& stdio,
                                 absl::Duration delay, bool idle) {
  if (!IsWarmableCommand(spec.argv, options_.python_exec)) {
    DDP_LOG(INFO) << "--prewarm: local rank " << spec.local_rank << " has no standby: its "
                  << "command is not `" << options_.python_exec << " -u ...` (--no-python or an "
                  << "executable entry point); it starts cold";
    return;
  }
  Request request{spec.argv, StaticPart(spec.env), stdio, clock_.Now() + delay, idle};
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
    if (standby->ready && !standby->gone) AwaitMaster(spec);
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
      PrepareStandby(spec, stdio, options_.refill_delay, options_.idle_cpu_priority);
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
  if (warmable) PrepareStandby(spec, stdio, options_.refill_delay, options_.idle_cpu_priority);
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
      for (const auto& standby : retired_) fds.push_back({standby->process.pidfd, POLLIN, 0});
      const absl::Time now = clock_.Now();
      for (const auto& [rank, request] : requests_) {
        wait = std::min(wait, std::max(absl::ZeroDuration(), request.due - now));
      }
      for (const auto& [rank, standby] : standbys_) {
        if (standby->idle && !standby->ready && !standby->gone) {
          const absl::Time promote = standby->started + options_.idle_import_limit;
          wait = std::min(wait, std::max(absl::ZeroDuration(), promote - now));
        }
      }
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
  for (auto& [rank, standby] : standbys_) {
    if (!standby->idle || standby->ready || standby->gone) continue;
    if (now < standby->started + options_.idle_import_limit) continue;
    // The CPU is busy (idle priority got next to nothing): import at normal
    // priority now, as a standby made after refill_delay would.
    standby->idle = false;
    if (absl::Status raised = RestoreNormalCpuPriority(standby->process.pid); !raised.ok()) {
      DDP_LOG(WARNING) << "--prewarm: local rank " << rank << ": " << raised;
    } else {
      DDP_LOG(INFO) << "--prewarm: local rank " << rank << ": standby still importing after "
                    << absl::FormatDuration(options_.idle_import_limit)
                    << " at idle priority; it goes on at normal priority";
    }
  }
}

void StandbyPool::ReadMessages() {
  absl::MutexLock lock(&mu_);
  for (auto it = standbys_.begin(); it != standbys_.end();) {
    Standby& standby = *it->second;
    if (standby.gone || !standby.Read()) {
      ++it;
      continue;
    }
    const absl::Duration age = clock_.Now() - standby.started;
    if (standby.ready && !standby.gone) {
      DDP_LOG(INFO) << "--prewarm: local rank " << standby.local_rank << ": standby (pid "
                    << standby.process.pid << ") imported " << absl::StrJoin(options_.modules, ",")
                    << " in " << absl::FormatDuration(absl::Trunc(age, absl::Milliseconds(10)))
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
                                  : absl::StrCat("; a new one in ",
                                                 absl::FormatDuration(options_.refill_delay)));
    if (for_good) {
      failed_[rank] = Key(standby.argv, standby.static_env);
    } else {
      requests_[rank] = Request{standby.argv, standby.static_env, standby.stdio,
                                clock_.Now() + options_.refill_delay, standby.idle_at_start};
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
  std::vector<std::pair<int, Request>> due;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_.Now();
    for (auto it = requests_.begin(); it != requests_.end();) {
      if (it->second.due > now) {
        ++it;
        continue;
      }
      auto current = standbys_.find(it->first);
      const bool same = current != standbys_.end() && !current->second->gone &&
                        current->second->argv == it->second.argv &&
                        current->second->static_env == it->second.static_env &&
                        current->second->stdio.stdout_target == it->second.stdio.stdout_target &&
                        current->second->stdio.stderr_target == it->second.stdio.stderr_target;
      if (!same) due.emplace_back(it->first, std::move(it->second));
      it = requests_.erase(it);
    }
  }
  for (auto& [rank, request] : due) {
    auto standby = std::make_unique<Standby>();
    standby->local_rank = rank;
    standby->argv = request.argv;
    standby->static_env = request.static_env;
    standby->stdio = request.stdio;
    standby->started = clock_.Now();
    standby->idle = standby->idle_at_start = request.idle;
    EnvMap env = request.static_env;
    auto path = env.find("PYTHONPATH");
    env["PYTHONPATH"] = path == env.end() || path->second.empty()
                            ? options_.site_dir
                            : absl::StrCat(options_.site_dir, ":", path->second);
    env["DDP_PREWARM_MODULES"] = absl::StrJoin(options_.modules, ",");
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) {
      DDP_LOG(WARNING) << "--prewarm: local rank " << rank << ": socketpair: " << strerror(errno);
      continue;
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
      continue;
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
}

}  // namespace ddp::client
