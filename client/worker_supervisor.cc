#include "client/worker_supervisor.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/activity_tracker.h"
#include "client/cpu_busy_window.h"
#include "client/hang_order.h"
#include "client/heartbeat_tracker.h"
#include "client/output_router.h"
#include "client/worker_process.h"
#include "common/failpoint.h"
#include "common/logging.h"
#include "common/proc_stats.h"
#include "common/status_macros.h"

namespace ddp::client {
namespace {

constexpr uint64_t kWakeTag = ~uint64_t{0};
constexpr uint64_t kTimerTag = ~uint64_t{0} - 1;
enum FdKind : uint64_t { kPidfd = 0, kStdout = 1, kStderr = 2 };
constexpr size_t kReadChunk = 64 << 10;
// No event says "this process group is now empty": Stop() checks at this
// period.
constexpr absl::Duration kGroupPollPeriod = absl::Milliseconds(10);

uint64_t Tag(size_t index, FdKind kind) { return (uint64_t{index} << 2) | kind; }

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

WorkerStdio DirectConsoleTargets(const WorkerSpec& spec, int console_out_fd, int console_err_fd) {
  WorkerStdio stdio;
  if (!IncludesStdout(spec.tee) && !IncludesStdout(spec.redirect)) {
    stdio.stdout_target = console_out_fd;
  }
  if (!spec.capture_stderr && !IncludesStderr(spec.tee) && !IncludesStderr(spec.redirect)) {
    stdio.stderr_target = console_err_fd;
  }
  return stdio;
}

std::string WorkerExit::Describe() const {
  switch (kind) {
    case Kind::kExited:
      return absl::StrCat("exit code ", exit_code);
    case Kind::kSignaled:
      return absl::StrCat("signal ", SignalName(signal));
    case Kind::kHung:
      return absl::StrCat("hang: ",
                          hang_signal == HangSignal::kIdle ? DescribeIdleness(silent_for)
                                                           : DescribeSilence(silent_for),
                          evidence.empty() ? "" : "; ", evidence);
  }
  return "unknown";
}

struct WorkerSupervisor::Worker {
  Worker(WorkerSpec s, absl::Duration heartbeat_timeout, ActivityTracker::Options activity_options)
      : spec(std::move(s)), tracker(heartbeat_timeout), activity(activity_options) {}
  WorkerSpec spec;
  SpawnedWorker process;
  std::unique_ptr<OutputRouter> out;
  std::unique_ptr<OutputRouter> err;
  // Set with `err`: every router of stderr writes files.stderr_log.
  std::unique_ptr<StderrTail> err_tail;
  // Its process group: its pid, or the group of an interactive run's workers
  // it joined.
  pid_t pgid = -1;
  HeartbeatTracker tracker;
  // Its process group's CPU and I/O, for a worker that never touches its
  // heartbeat file.
  ActivityTracker activity;
  // Its process group's CPU share over the last seconds (WorkerState::
  // cpu_busy_permille), from the same samples.
  CpuBusyWindow cpu_busy{CpuBusyWindow::Options{}};
  // The process at the previous heartbeat check (hang evidence: is it still
  // using CPU?).
  std::optional<ProcessSample> last_sample;
  bool exited = false;
  bool hang_reported = false;
};

// Owns the descriptors and per-worker state; everything here runs on the
// monitor thread except the constructor, Init() and Wake().
class WorkerSupervisor::EventLoop {
 public:
  EventLoop(WorkerSupervisor* owner, std::vector<WorkerSpec> specs) : owner_(owner) {
    for (WorkerSpec& spec : specs) workers_.push_back(NewWorker(std::move(spec)));
    buffer_.resize(kReadChunk);
  }

  // A worker watched with the supervisor's heartbeat and activity rules.
  std::unique_ptr<Worker> NewWorker(WorkerSpec spec) const {
    ActivityTracker::Options activity;
    activity.hang_timeout = owner_->options_.hang_timeout;
    return std::make_unique<Worker>(std::move(spec), owner_->options_.heartbeat_timeout, activity);
  }
  ~EventLoop() {
    for (auto& w : workers_) {
      CloseFd(w->process.pidfd);
      CloseFd(w->process.stdout_fd);
      CloseFd(w->process.stderr_fd);
    }
    CloseFd(timer_fd_);
    CloseFd(wake_fd_);
    CloseFd(epoll_fd_);
  }

  absl::Status Init() {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || wake_fd_ < 0) {
      return absl::InternalError(absl::StrCat("epoll/eventfd: ", strerror(errno)));
    }
    Watch(wake_fd_, kWakeTag);
    const WorkerSupervisor::Options& o = owner_->options_;
    if (o.heartbeat_timeout > absl::ZeroDuration() || o.hang_timeout > absl::ZeroDuration()) {
      timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
      if (timer_fd_ < 0) return absl::InternalError(absl::StrCat("timerfd: ", strerror(errno)));
      itimerspec period{};
      period.it_interval = absl::ToTimespec(o.check_interval);
      period.it_value = period.it_interval;
      timerfd_settime(timer_fd_, 0, &period, nullptr);
      Watch(timer_fd_, kTimerTag);
    }
    return absl::OkStatus();
  }

  // Of worker `index` (the order of states_). Set before the monitor thread
  // starts, never changed: any thread.
  const std::string& HeartbeatFileOf(size_t index) const {
    return workers_[index]->spec.files.heartbeat_file;
  }

  void Wake() {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }

  void Run() {
    pthread_setname_np(pthread_self(), "worker-monitor");
    {
      absl::MutexLock lock(&owner_->mu_);
      owner_->monitor_id_ = std::this_thread::get_id();
    }
    absl::Status spawned = SpawnAll();
    DDP_FAILPOINT("workers_spawned");
    {
      absl::MutexLock lock(&owner_->mu_);
      owner_->spawn_result_ = spawned;
    }
    epoll_event events[64];
    while (true) {
      {
        absl::MutexLock lock(&owner_->mu_);
        if (owner_->quit_) break;
      }
      const int n = epoll_wait(epoll_fd_, events, 64, -1);
      if (n < 0 && errno != EINTR) {
        DDP_LOG(ERROR) << "epoll_wait failed: " << strerror(errno);
        break;
      }
      for (int e = 0; e < n; ++e) Dispatch(events[e].data.u64);
    }
    for (size_t i = 0; i < workers_.size(); ++i) DrainPipes(i);
  }

 private:
  void Watch(int fd, uint64_t tag) {
    if (fd < 0) return;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = tag;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
  }
  void Unwatch(int& fd) {
    if (fd < 0) return;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    CloseFd(fd);
  }

  absl::Status SpawnAll() {
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (absl::Status s = SpawnOne(i); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status SpawnOne(size_t i) {
    const WorkerSupervisor::Options& o = owner_->options_;
    Worker& w = *workers_[i];
    const WorkerSpec& spec = w.spec;
    if (absl::Status s = MakeDirectories(spec.files.dir); !s.ok()) return s;
    unlink(spec.files.error_file.c_str());  // stale files of a reused directory
    unlink(spec.files.heartbeat_file.c_str());
    unlink(spec.files.stack_dump_file.c_str());
    WorkerStdio stdio = DirectConsoleTargets(spec, o.console_out_fd, o.console_err_fd);
    if (o.terminal_fd >= 0) {
      // An interactive run: the first worker leads the group that takes the
      // terminal's foreground, the others join it (as torchrun's workers all
      // sit in the launcher's foreground group).
      if (terminal_group_ > 0) {
        stdio.process_group = terminal_group_;
      } else {
        stdio.terminal_fd = o.terminal_fd;
      }
    }
    auto make_router = [&](bool is_out) -> std::unique_ptr<OutputRouter> {
      if ((is_out ? stdio.stdout_target : stdio.stderr_target) >= 0) {
        return nullptr;  // the worker writes to the console itself
      }
      const bool teed = is_out ? IncludesStdout(spec.tee) : IncludesStderr(spec.tee);
      const bool redirected =
          is_out ? IncludesStdout(spec.redirect) : IncludesStderr(spec.redirect);
      OutputRouter::Options r;
      if (teed || redirected) {
        r.file_path = is_out ? spec.files.stdout_log : spec.files.stderr_log;
      }
      if (teed && spec.show_on_console) r.console_fd = is_out ? o.console_out_fd : o.console_err_fd;
      r.prefix = spec.console_prefix;
      if (!is_out && !teed && !redirected) {
        // Captured for its tail only: to the console as if the worker
        // wrote there itself, and kept whole in stderr.log.
        r.file_path = spec.files.stderr_log;
        r.console_fd = o.console_err_fd;
        r.passthrough = true;
      }
      r.max_line_bytes = o.max_line_bytes;
      return std::make_unique<OutputRouter>(std::move(r));
    };
    w.out = make_router(true);
    w.err = make_router(false);
    if (w.err != nullptr) w.err_tail = std::make_unique<StderrTail>(o.stderr_tail_limits);
    if (w.out != nullptr) {
      if (absl::Status s = w.out->Open(); !s.ok()) return s;
    }
    if (w.err != nullptr) {
      if (absl::Status s = w.err->Open(); !s.ok()) return s;
    }

    DDP_ASSIGN_OR_RETURN(
        SpawnedWorker process,
        o.launch ? o.launch(spec, stdio) : SpawnWorker(spec.argv, ToEnvStrings(spec.env), stdio));
    w.process = process;
    // Not reaped before this thread's next HandleExit, so the group is known
    // even if it exited already. A --prewarm standby leads its own group.
    w.pgid = getpgid(process.pid);
    if (w.pgid <= 0) w.pgid = process.pid;
    if (o.terminal_fd >= 0 && terminal_group_ <= 0 && w.pgid == process.pid) {
      terminal_group_ = w.pgid;
    }
    {
      absl::MutexLock lock(&owner_->mu_);
      owner_->states_[i].pid = w.process.pid;
      owner_->states_[i].running = true;
      owner_->process_groups_[i] = w.pgid;
    }
    Watch(w.process.pidfd, Tag(i, kPidfd));
    Watch(w.process.stdout_fd, Tag(i, kStdout));
    Watch(w.process.stderr_fd, Tag(i, kStderr));
    return absl::OkStatus();
  }

  // A Replace or Reassign posted by another thread (slot_request_).
  void HandleSlotRequest() {
    SlotRequest* request;
    {
      absl::MutexLock lock(&owner_->mu_);
      request = owner_->slot_request_;
    }
    if (request == nullptr || request->result.has_value()) return;
    absl::Status result = ApplySlotRequest(*request);
    absl::MutexLock lock(&owner_->mu_);
    request->result = result;
  }

  absl::Status ApplySlotRequest(SlotRequest& request) {
    size_t index = workers_.size();
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (workers_[i]->spec.local_rank == request.spec.local_rank) index = i;
    }
    if (index == workers_.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no worker slot for local rank ", request.spec.local_rank));
    }
    Worker& old = *workers_[index];
    if (old.exited != request.respawn) {
      return absl::FailedPreconditionError(
          absl::StrCat("the worker of local rank ", request.spec.local_rank,
                       request.respawn ? " still runs: it cannot be replaced"
                                       : " has exited: nothing to reassign"));
    }
    // Hang tracking starts afresh with each generation (knock-on order too).
    first_hang_rank_ = -1;
    first_hang_stopped_ = false;
    if (!request.respawn) {
      // The worker writes its heartbeat, progress and error files there.
      if (absl::Status s = MakeDirectories(request.spec.files.dir); !s.ok()) return s;
      old.spec.files = request.spec.files;
      old.spec.global_rank = request.spec.global_rank;
      old.spec.env = request.spec.env;  // the secrets its stderr tail redacts
      old.tracker = HeartbeatTracker(owner_->options_.heartbeat_timeout);
      old.last_sample.reset();
      old.hang_reported = false;
      unlink(old.spec.files.error_file.c_str());
      unlink(old.spec.files.heartbeat_file.c_str());
      absl::MutexLock lock(&owner_->mu_);
      owner_->states_[index].global_rank = request.spec.global_rank;
      owner_->states_[index].hung = false;
      return absl::OkStatus();
    }
    Unwatch(old.process.stdout_fd);  // a grandchild may hold the old pipes
    Unwatch(old.process.stderr_fd);
    workers_[index] = NewWorker(std::move(request.spec));
    {
      absl::MutexLock lock(&owner_->mu_);
      WorkerState& state = owner_->states_[index];
      state = WorkerState{};
      state.local_rank = workers_[index]->spec.local_rank;
      state.global_rank = workers_[index]->spec.global_rank;
      owner_->stop_requested_[index] = false;
    }
    return SpawnOne(index);
  }

  void Dispatch(uint64_t tag) {
    if (tag == kWakeTag) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof(count));
      HandleSlotRequest();
      return;
    }
    if (tag == kTimerTag) {
      uint64_t expirations;
      (void)!read(timer_fd_, &expirations, sizeof(expirations));
      CheckHeartbeats();
      return;
    }
    const size_t index = tag >> 2;
    if (index >= workers_.size()) return;
    switch (static_cast<FdKind>(tag & 3)) {
      case kPidfd:
        HandleExit(index);
        break;
      case kStdout:
        ReadPipe(workers_[index]->process.stdout_fd, workers_[index]->out.get());
        break;
      case kStderr:
        ReadPipe(workers_[index]->process.stderr_fd, workers_[index]->err.get(),
                 workers_[index]->err_tail.get());
        break;
    }
  }

  // Reads what is available now; closes the pipe at EOF. No router: the
  // stream goes to the console directly and there is no pipe.
  void ReadPipe(int& fd, OutputRouter* router, StderrTail* tail = nullptr) {
    if (router == nullptr) return;
    while (fd >= 0) {
      const ssize_t n = read(fd, buffer_.data(), buffer_.size());
      if (n > 0) {
        const absl::string_view bytes(buffer_.data(), static_cast<size_t>(n));
        router->Write(bytes);
        if (tail != nullptr) tail->Append(bytes);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      router->Flush();  // EOF (or an error): the stream is over
      Unwatch(fd);
    }
  }

  void DrainPipes(size_t index) {
    Worker& w = *workers_[index];
    ReadPipe(w.process.stdout_fd, w.out.get());
    ReadPipe(w.process.stderr_fd, w.err.get(), w.err_tail.get());
  }

  // The worker's stderr as its failure report carries it (secrets of its
  // environment redacted).
  void AttachStderr(const Worker& w, WorkerExit& exit) {
    if (w.err_tail == nullptr) return;  // stderr went to the console directly
    exit.stderr_log = w.spec.files.stderr_log;
    const std::vector<std::string> secrets = SecretValuesIn(w.spec.env);
    exit.stderr_tail = RedactSecrets(w.err_tail->Text(), secrets);
    exit.stderr_traceback = PythonTracebackIn(exit.stderr_tail);
  }

  void HandleExit(size_t index) {
    Worker& w = *workers_[index];
    int status = 0;
    pid_t reaped;
    do {
      reaped = waitpid(w.process.pid, &status, WNOHANG);
    } while (reaped < 0 && errno == EINTR);
    if (reaped == 0) return;  // not yet (spurious wake-up)
    Unwatch(w.process.pidfd);
    DrainPipes(index);  // output written just before the exit comes first
    w.exited = true;
    // The terminal's foreground group has no worker left: take the terminal
    // back, so a Ctrl-C between generations reaches the agent.
    if (w.pgid == terminal_group_ && RunningWorkersIn(terminal_group_) == 0) {
      ReclaimTerminal(owner_->options_.terminal_fd);
      terminal_group_ = -1;
    }

    WorkerExit exit;
    exit.local_rank = w.spec.local_rank;
    exit.global_rank = w.spec.global_rank;
    exit.pid = w.process.pid;
    exit.time = owner_->clock_.Now();
    exit.error_file = w.spec.files.error_file;
    if (reaped < 0) {  // someone else reaped it (waitpid(-1) elsewhere): report unknown
      exit.exit_code = -1;
    } else if (WIFSIGNALED(status)) {
      exit.kind = WorkerExit::Kind::kSignaled;
      exit.signal = WTERMSIG(status);
    } else {
      exit.exit_code = WEXITSTATUS(status);
    }
    absl::StatusOr<ErrorFileContent> error =
        ReadErrorFile(w.spec.files.error_file, owner_->options_.error_file_limits);
    if (error.ok()) {
      exit.error = *error;
    } else if (!w.process.exec_error.empty()) {
      exit.error = ErrorFileContent{w.process.exec_error, "", ""};
    }
    AttachStderr(w, exit);
    owner_->RecordExit(index, std::move(exit));
  }

  void CheckHeartbeats() {
    absl::Duration forgive;
    {
      absl::MutexLock lock(&owner_->mu_);
      if (owner_->stopping_ || owner_->frozen_) return;
      forgive = owner_->unforgiven_pause_;
      owner_->unforgiven_pause_ = absl::ZeroDuration();
    }
    if (forgive > absl::ZeroDuration()) {
      for (auto& w : workers_) {
        w->tracker.Forgive(forgive);
        w->activity.Forgive(forgive);
        w->cpu_busy.Restart();
        w->last_sample.reset();  // its CPU time did not move while frozen
      }
    }
    const absl::Time now = owner_->clock_.Now();
    std::vector<HungWorker> hung = IdleWorkers(now);
    for (size_t i = 0; i < workers_.size(); ++i) {
      Worker& w = *workers_[i];
      if (w.exited || w.hang_reported || w.process.pid <= 0) continue;
      struct stat st;
      std::optional<absl::Time> mtime;
      if (stat(w.spec.files.heartbeat_file.c_str(), &st) == 0) {
        mtime = absl::TimeFromTimespec(st.st_mtim);
      }
      // The process's state and CPU time: the evidence that tells a stopped
      // or spinning culprit from peers blocked behind it (hang_order.h).
      absl::StatusOr<ProcessSample> sample = SampleProcess(w.process.pid);
      std::optional<ProcessSample> previous = w.last_sample;
      if (sample.ok()) w.last_sample = *sample;
      if (!w.tracker.Observe(mtime, now)) continue;
      w.hang_reported = true;
      HungWorker h{i, w.spec.global_rank, *w.tracker.last_touch(), *w.tracker.last_mtime()};
      if (sample.ok()) {
        h.process_state = sample->state;
        h.cpu_progress = previous.has_value() && sample->cpu > previous->cpu;
      }
      hung.push_back(h);
    }
    if (hung.empty()) return;
    OrderHungWorkers(hung);
    for (const HungWorker& h : hung) {
      Worker& w = *workers_[h.index];
      WorkerExit hang;
      hang.kind = WorkerExit::Kind::kHung;
      hang.local_rank = w.spec.local_rank;
      hang.global_rank = w.spec.global_rank;
      hang.pid = w.process.pid;
      hang.time = now;
      hang.last_heartbeat = h.last_touch;
      if (w.tracker.touched()) {
        hang.silent_for = w.tracker.SilentFor(now);
        hang.evidence = HangEvidence(h);
      } else {
        hang.hang_signal = WorkerExit::HangSignal::kIdle;
        hang.silent_for = w.activity.IdleFor(now);
        const std::string stood_out = HangEvidence(h);
        hang.evidence = stood_out.empty()
                            ? "the worker and its children idle (heartbeat file never touched)"
                            : stood_out;
      }
      hang.process_stopped = HangEvidenceClass(h) == 1;
      hang.error_file = w.spec.files.error_file;
      AttachStderr(w, hang);
      // The first hang of this generation on this node is the culprit; every
      // later one (same check, younger heartbeat, or a later check) blocked
      // behind it. Except a stopped process found after a hang that was not
      // stopped: a stopped process stalls its peers, never the other way
      // round, so it is a hang of its own (and the likelier cause).
      if (first_hang_rank_ < 0 || (hang.process_stopped && !first_hang_stopped_)) {
        first_hang_rank_ = w.spec.global_rank;
        first_hang_stopped_ = hang.process_stopped;
      } else {
        hang.knock_on_of_rank = first_hang_rank_;
      }
      owner_->RecordHang(h.index, std::move(hang));
    }
  }

  // Samples every running worker's process group (every
  // activity_sample_interval); when none of them was active for
  // hang_timeout, returns those that never touched their heartbeat file and
  // are judged (ActivityTracker) hung, marked reported.
  std::vector<HungWorker> IdleWorkers(absl::Time now) {
    const WorkerSupervisor::Options& o = owner_->options_;
    if (o.hang_timeout <= absl::ZeroDuration() || now < next_activity_sample_) return {};
    next_activity_sample_ = now + o.activity_sample_interval;
    // A worker's processes: its group, or, in a group shared with other
    // workers (an interactive run), its own process tree.
    std::vector<pid_t> groups, trees;
    for (auto& w : workers_) {
      if (w->exited || w->process.pid <= 0) continue;
      const bool shared = w->pgid != w->process.pid || RunningWorkersIn(w->pgid) > 1;
      (shared ? trees : groups).push_back(w->process.pid);
    }
    std::map<pid_t, ProcessGroupSample> samples = SampleProcessGroups(groups);
    samples.merge(SampleProcessTrees(trees));
    bool node_active = false;
    std::vector<size_t> idle;
    std::vector<std::optional<absl::Time>> idle_since(workers_.size());
    std::vector<int> cpu_busy_permille(workers_.size(), 0);
    for (size_t i = 0; i < workers_.size(); ++i) {
      Worker& w = *workers_[i];
      if (w.exited || w.process.pid <= 0) continue;
      auto it = samples.find(w.process.pid);
      w.activity.Observe(
          it == samples.end() ? std::nullopt : std::optional<ProcessGroupSample>(it->second), now);
      if (it != samples.end()) w.cpu_busy.Observe(it->second.cpu, now);
      cpu_busy_permille[i] = w.cpu_busy.reported_permille();
      // Judged by its heartbeat file once it touched it.
      if (!w.tracker.touched() && w.activity.judged() &&
          w.activity.IdleFor(now) > o.idle_report_after) {
        idle_since[i] = w.activity.last_active();
      }
      if (w.hang_reported) continue;
      if (w.activity.IdleFor(now) <= o.hang_timeout) node_active = true;
      if (!w.tracker.touched() && w.activity.Hung(now)) idle.push_back(i);
    }
    {
      absl::MutexLock lock(&owner_->mu_);
      for (size_t i = 0; i < workers_.size() && i < owner_->states_.size(); ++i) {
        owner_->states_[i].idle_since = idle_since[i];
        owner_->states_[i].cpu_busy_permille = cpu_busy_permille[i];
      }
    }
    std::vector<HungWorker> hung;
    if (node_active || !o.declare_idle_hangs) return hung;
    for (size_t i : idle) {
      Worker& w = *workers_[i];
      w.hang_reported = true;
      HungWorker h{i, w.spec.global_rank, *w.activity.last_active(), *w.activity.last_active()};
      if (absl::StatusOr<ProcessSample> sample = SampleProcess(w.process.pid); sample.ok()) {
        h.process_state = sample->state;
      }
      hung.push_back(h);
    }
    return hung;
  }

  // How many workers that have not exited are in group `pgid`.
  int RunningWorkersIn(pid_t pgid) const {
    int running = 0;
    for (const auto& w : workers_) {
      if (!w->exited && w->process.pid > 0 && w->pgid == pgid) ++running;
    }
    return running;
  }

  WorkerSupervisor* const owner_;
  std::vector<std::unique_ptr<Worker>> workers_;
  // An interactive run's shared group (terminal foreground) while a worker
  // of it runs; -1 before the first worker and once they all exited.
  pid_t terminal_group_ = -1;
  absl::Time next_activity_sample_ = absl::InfinitePast();
  std::vector<char> buffer_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int timer_fd_ = -1;
  int first_hang_rank_ = -1;         // global rank of the first reported hang
  bool first_hang_stopped_ = false;  // that hang's process was stopped
};

WorkerSupervisor::WorkerSupervisor(Options options, const Clock& clock, ExitCallback on_exit)
    : options_(std::move(options)), clock_(clock), on_exit_(std::move(on_exit)) {}

WorkerSupervisor::~WorkerSupervisor() {
  absl::Status s = Stop(options_.destructor_stop_timeout);
  if (!s.ok()) DDP_LOG(WARNING) << "stopping workers: " << s;
}

absl::Status WorkerSupervisor::Start(std::vector<WorkerSpec> specs) {
  if (specs.empty()) return absl::InvalidArgumentError("no workers to start");
  for (const WorkerSpec& spec : specs) {
    if (spec.argv.empty() || spec.argv[0].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("empty command for local rank ", spec.local_rank));
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("Start() was already called");
    started_ = true;
    for (const WorkerSpec& spec : specs) {
      WorkerState state;
      state.local_rank = spec.local_rank;
      state.global_rank = spec.global_rank;
      states_.push_back(state);
    }
    stop_requested_.assign(states_.size(), false);
    process_groups_.assign(states_.size(), -1);
  }
  loop_ = std::make_unique<EventLoop>(this, std::move(specs));
  if (absl::Status s = loop_->Init(); !s.ok()) {
    absl::MutexLock lock(&mu_);
    spawn_result_ = s;  // no thread, nothing started
    start_done_ = true;
    return s;
  }
  monitor_ = std::thread([this] { loop_->Run(); });
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::optional<absl::Status>* r) { return r->has_value(); }, &spawn_result_));
  start_done_ = true;
  // Frozen while they were being spawned (a lease that ran out during a slow
  // start): they stop now, before they run on without a lease.
  if (frozen_) SignalRunningGroupsLocked(SIGSTOP);
  return *spawn_result_;
}

bool WorkerSupervisor::AllExitedLocked() const {
  for (const WorkerState& state : states_) {
    if (state.running) return false;
  }
  return true;
}

bool WorkerSupervisor::AllExitedLocked(const std::vector<size_t>& indices) const {
  for (size_t i : indices) {
    if (states_[i].running) return false;
  }
  return true;
}

bool WorkerSupervisor::AwaitAllExited(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(
                                  +[](WorkerSupervisor* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                    return self->AllExitedLocked();
                                  },
                                  this),
                              timeout);
}

std::vector<WorkerState> WorkerSupervisor::Workers() const {
  absl::MutexLock lock(&mu_);
  return states_;
}

void WorkerSupervisor::RecordExit(size_t index, WorkerExit exit) {
  {
    absl::MutexLock lock(&mu_);
    exit.during_stop = stopping_ || stop_requested_[index];
    states_[index].running = false;
    states_[index].exit = exit;
  }
  if (on_exit_) on_exit_(exit);
}

void WorkerSupervisor::RecordHang(size_t index, WorkerExit hang) {
  {
    absl::MutexLock lock(&mu_);
    states_[index].hung = true;
  }
  if (on_exit_) on_exit_(hang);
}

absl::Status WorkerSupervisor::Stop(absl::Duration timeout, int first_signal) {
  {
    absl::MutexLock lock(&mu_);
    if (started_ && monitor_id_ == std::this_thread::get_id()) {
      return absl::FailedPreconditionError(
          "Stop() called from the ExitCallback (the monitor thread); call it "
          "from another "
          "thread");
    }
    if (!started_ || stopped_) return absl::OkStatus();
    if (stopping_) {  // another thread is stopping: wait for it
      mu_.Await(absl::Condition(&stopped_));
      return absl::OkStatus();
    }
    stopping_ = true;
  }
  std::vector<size_t> all;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&start_done_));  // every worker is in states_
    for (size_t i = 0; i < states_.size(); ++i) all.push_back(i);
  }
  absl::Status status = StopIndices(all, timeout, first_signal);
  {
    absl::MutexLock lock(&mu_);
    quit_ = true;
  }
  if (monitor_.joinable()) {  // absent when Init() failed
    loop_->Wake();
    monitor_.join();
  }
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  return status;
}

void WorkerSupervisor::Freeze() {
  absl::MutexLock lock(&mu_);
  // While stopping, too: a SIGTERM handler stops where it is, and the stop
  // goes on to SIGKILL.
  if (!started_ || stopped_ || frozen_) return;
  frozen_ = true;
  frozen_at_ = clock_.Now();
  if (!start_done_) return;  // still spawning: Start stops them once spawned
  SignalRunningGroupsLocked(SIGSTOP);
}

void WorkerSupervisor::Thaw() {
  absl::MutexLock lock(&mu_);
  if (!frozen_ || stopping_ || stopped_) return;
  frozen_ = false;
  // Forgiven in the trackers, which count on clock_: measured on it too.
  unforgiven_pause_ += clock_.Now() - frozen_at_;
  SignalRunningGroupsLocked(SIGCONT);
}

void WorkerSupervisor::SignalRunningGroupsLocked(int signal) {
  std::vector<pid_t> signalled;  // a shared group once
  for (size_t i = 0; i < states_.size(); ++i) {
    const pid_t pgid = process_groups_[i];
    if (states_[i].pid <= 0 || !states_[i].running || pgid <= 0) continue;
    if (std::find(signalled.begin(), signalled.end(), pgid) != signalled.end()) continue;
    signalled.push_back(pgid);
    SignalProcessGroup(pgid, signal);
  }
}

std::vector<WorkerExit> WorkerSupervisor::StoppedWorkers() const {
  std::vector<WorkerState> states;
  {
    absl::MutexLock lock(&mu_);
    if (!start_done_ || stopped_ || frozen_ || loop_ == nullptr) return {};
    states = states_;
  }
  std::vector<WorkerExit> stopped;
  for (size_t i = 0; i < states.size(); ++i) {
    const WorkerState& state = states[i];
    if (state.pid <= 0 || !state.running || state.hung || state.exit) continue;
    HungWorker seen{i, state.global_rank};
    if (absl::StatusOr<ProcessSample> sample = SampleProcess(state.pid); sample.ok()) {
      seen.process_state = sample->state;
    }
    if (HangEvidenceClass(seen) != 1) continue;  // not stopped
    WorkerExit hang;
    hang.kind = WorkerExit::Kind::kHung;
    hang.local_rank = state.local_rank;
    hang.global_rank = state.global_rank;
    hang.pid = state.pid;
    hang.time = clock_.Now();
    hang.process_stopped = true;
    hang.evidence = absl::StrCat(HangEvidence(seen), " when the group stop began");
    struct stat st;
    if (stat(loop_->HeartbeatFileOf(i).c_str(), &st) == 0) {
      hang.last_heartbeat = absl::TimeFromTimespec(st.st_mtim);
      hang.silent_for = hang.time - hang.last_heartbeat;
    }
    stopped.push_back(std::move(hang));
  }
  return stopped;
}

bool WorkerSupervisor::frozen() const {
  absl::MutexLock lock(&mu_);
  return frozen_;
}

absl::Status WorkerSupervisor::StopRanks(const std::vector<int>& local_ranks,
                                         absl::Duration timeout) {
  std::vector<size_t> indices;
  {
    absl::MutexLock lock(&mu_);
    if (started_ && monitor_id_ == std::this_thread::get_id()) {
      return absl::FailedPreconditionError("StopRanks() called from the ExitCallback");
    }
    if (!started_ || stopping_ || stopped_) {
      return absl::FailedPreconditionError("StopRanks(): the workers are not running");
    }
    mu_.Await(absl::Condition(&start_done_));
    for (size_t i = 0; i < states_.size(); ++i) {
      for (int rank : local_ranks) {
        if (states_[i].local_rank == rank) {
          indices.push_back(i);
          stop_requested_[i] = true;
        }
      }
    }
  }
  return StopIndices(indices, timeout, SIGTERM);
}

absl::Status WorkerSupervisor::Replace(WorkerSpec spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty command for local rank ", spec.local_rank));
  }
  return RunOnMonitor(std::move(spec), /*respawn=*/true);
}

absl::Status WorkerSupervisor::Reassign(WorkerSpec spec) {
  return RunOnMonitor(std::move(spec), /*respawn=*/false);
}

absl::Status WorkerSupervisor::RunOnMonitor(WorkerSpec spec, bool respawn) {
  SlotRequest request;
  request.spec = std::move(spec);
  request.respawn = respawn;
  {
    absl::MutexLock lock(&mu_);
    if (started_ && monitor_id_ == std::this_thread::get_id()) {
      return absl::FailedPreconditionError("Replace/Reassign called from the ExitCallback");
    }
    mu_.Await(absl::Condition(&start_done_));
    if (!started_ || stopping_ || stopped_ || !monitor_.joinable()) {
      return absl::FailedPreconditionError("the supervisor is not running");
    }
    mu_.Await(absl::Condition(
        +[](SlotRequest** pending) { return *pending == nullptr; }, &slot_request_));
    slot_request_ = &request;
  }
  loop_->Wake();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](SlotRequest* r) { return r->result.has_value(); }, &request));
  slot_request_ = nullptr;
  absl::Status result = *request.result;
  // Frozen meanwhile (the lease): a new worker stops as its peers did.
  if (result.ok() && respawn && frozen_) SignalRunningGroupsLocked(SIGSTOP);
  return result;
}

absl::Status WorkerSupervisor::StopIndices(const std::vector<size_t>& indices,
                                           absl::Duration timeout, int first_signal) {
  // Signalled as a whole: the group of each worker to stop, unless a worker
  // that runs on shares it (an interactive run's group, when StopRanks stops
  // some workers only): then the worker's own process tree.
  std::vector<pid_t> groups;
  std::vector<pid_t> trees;
  bool was_frozen = false;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i : indices) {
      const pid_t pgid = process_groups_[i];
      if (states_[i].pid <= 0 || pgid <= 0) continue;
      bool others_run_on = false;
      for (size_t j = 0; j < states_.size(); ++j) {
        others_run_on |= process_groups_[j] == pgid && states_[j].running &&
                         std::find(indices.begin(), indices.end(), j) == indices.end();
      }
      if (others_run_on) {
        if (states_[i].running) trees.push_back(states_[i].pid);
      } else if (std::find(groups.begin(), groups.end(), pgid) == groups.end()) {
        groups.push_back(pgid);
      }
    }
    was_frozen = frozen_;
  }
  auto send = [&](int signal) {
    for (pid_t pgid : groups) SignalProcessGroup(pgid, signal);
    for (pid_t pid : trees) SignalProcessTree(pid, signal);
  };
  auto any_group_alive = [&] {
    for (pid_t pgid : groups) {
      if (ProcessGroupAlive(pgid)) return true;
    }
    return false;
  };
  // Real waits for real processes: measured on CLOCK_MONOTONIC, which never
  // steps with the wall clock (the injected clock_ only dates exits).
  const Clock& monotonic = MonotonicClock::Get();
  // A freeze (the lease ran out meanwhile) ends a wait for a polite exit:
  // frozen workers cannot exit; SIGKILL follows.
  auto await_all = [&](absl::Duration budget, bool until_frozen) {
    const absl::Time deadline = monotonic.Now() + budget;
    {
      absl::MutexLock lock(&mu_);
      auto done = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return AllExitedLocked(indices) || (until_frozen && frozen_);
      };
      mu_.AwaitWithTimeout(absl::Condition(&done), budget);
    }
    while (any_group_alive() && monotonic.Now() < deadline && !(until_frozen && frozen())) {
      absl::SleepFor(kGroupPollPeriod);
    }
    absl::MutexLock lock(&mu_);
    return AllExitedLocked(indices) && !any_group_alive();
  };

  const absl::Time started = monotonic.Now();
  // As systemd does: SIGCONT after the polite signal, so that a worker
  // stopped by someone else (a stray SIGSTOP, a debugger's detach) handles it
  // instead of holding the stop up to the timeout. Not for a group the lease
  // froze: that one may be superseded and is never let run again.
  auto resume_stopped = [&] { send(SIGCONT); };
  if (!was_frozen) {
    if (first_signal != SIGTERM && first_signal > 0) {
      send(first_signal);
      resume_stopped();
      if (await_all(timeout / 2, true)) return absl::OkStatus();
      DDP_LOG(WARNING) << "workers still running " << absl::FormatDuration(timeout / 2) << " after "
                       << SignalName(first_signal) << "; sending SIGTERM";
    }
    send(SIGTERM);
    resume_stopped();
    if (await_all(timeout - (monotonic.Now() - started), true)) return absl::OkStatus();
    DDP_LOG(WARNING) << "workers still running " << absl::FormatDuration(timeout)
                     << " after SIGTERM; sending SIGKILL";
  }
  // Frozen workers are not asked: SIGKILL ends them in place.
  send(SIGKILL);
  if (await_all(options_.kill_grace, false)) return absl::OkStatus();
  std::vector<pid_t> alive;
  for (pid_t pgid : groups) {
    if (ProcessGroupAlive(pgid)) alive.push_back(pgid);
  }
  std::vector<pid_t> unreaped;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i : indices) {
      if (states_[i].running) unreaped.push_back(states_[i].pid);
    }
  }
  return absl::DeadlineExceededError(
      absl::StrCat("process groups still present ", absl::FormatDuration(options_.kill_grace),
                   " after SIGKILL: ", absl::StrJoin(alive, ","),
                   " (zombies of orphaned grandchildren that init has not reaped?)",
                   unreaped.empty() ? "" : "; workers not reaped: ", absl::StrJoin(unreaped, ",")));
}

}  // namespace ddp::client
