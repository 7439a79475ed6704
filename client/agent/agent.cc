#include "client/agent/agent.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/agent/node_health_checks.h"
#include "client/free_port.h"
#include "client/launcher_error_file.h"
#include "client/nccl_unique_id.h"
#include "client/preemption_notice.h"
#include "client/worker_failure.h"
#include "client/worker_files.h"
#include "common/logging.h"

namespace ddp::client {
namespace {

constexpr size_t kMaxErrorMessageBytes = 4096;  // the coordinator's cap

// The first line of a check's output, for a log line and a Leave's reason.
std::string CheckHeadline(const std::string& output) {
  std::string line = output.substr(0, output.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return line;
}
constexpr size_t kMaxTracebackBytes = 8 << 10;  // the coordinator keeps the end
constexpr int kMaxLocalWorldSize = 4096;

std::string Capped(const std::string& text, size_t limit) {
  return text.size() <= limit ? text : text.substr(0, limit);
}

// Checks an Assignment from the network before it sizes anything.
absl::Status ValidateAssignment(const v1::Assignment& a) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("assignment of generation ", a.generation(), " is invalid: ", what));
  };
  if (a.generation() <= 0) return bad("generation must be positive");
  if (a.local_world_size() < 1 || a.local_world_size() > kMaxLocalWorldSize) {
    return bad(absl::StrCat("local_world_size ", a.local_world_size(), " is outside [1, ",
                            kMaxLocalWorldSize, "]"));
  }
  if (a.group_world_size() < 1 || a.group_rank() < 0 || a.group_rank() >= a.group_world_size()) {
    return bad(absl::StrCat("group rank ", a.group_rank(), " of ", a.group_world_size()));
  }
  if (a.global_rank_offset() < 0 || a.world_size() > INT32_MAX ||
      a.global_rank_offset() + a.local_world_size() > a.world_size()) {
    return bad(absl::StrCat("ranks [", a.global_rank_offset(), ", +", a.local_world_size(),
                            ") exceed world size ", a.world_size()));
  }
  if (a.role_world_size() < 0 || a.role_rank_offset() < 0 ||
      (a.role_world_size() > 0 &&
       a.role_rank_offset() + a.local_world_size() > a.role_world_size())) {
    return bad(absl::StrCat("role ranks [", a.role_rank_offset(), ", +", a.local_world_size(),
                            ") exceed the role's world size ", a.role_world_size()));
  }
  if (a.master_port() < 1 || a.master_port() > 65535) {
    return bad(absl::StrCat("master port ", a.master_port()));
  }
  if (a.master_addr().empty() || a.master_addr().size() > 255) {
    return bad("master address empty or longer than 255 bytes");
  }
  if (!a.nccl_unique_id().empty() && a.nccl_unique_id().size() != kNcclUniqueIdBytes) {
    return bad(absl::StrCat("NCCL unique id of ", a.nccl_unique_id().size(), " bytes (want ",
                            kNcclUniqueIdBytes, " or 0)"));
  }
  return absl::OkStatus();
}

}  // namespace

WorkerFailure FailureFromProto(const v1::Failure& failure) {
  WorkerFailure f;
  f.node = failure.node_id();
  f.global_rank = static_cast<int>(failure.global_rank());
  f.local_rank = failure.local_rank();
  f.pid = failure.pid();
  if (failure.hang()) {
    f.kind = WorkerFailure::Kind::kHang;
  } else if (failure.signal() != 0) {
    f.kind = WorkerFailure::Kind::kSignal;
    f.signal = failure.signal();
  } else {
    f.kind = WorkerFailure::Kind::kExitCode;
    f.exit_code = failure.exit_code();
  }
  f.message = failure.message();
  f.traceback = failure.traceback();
  f.stderr_tail = failure.stderr_tail();
  f.log_path = failure.log_path();
  f.time = absl::FromUnixMillis(failure.time_unix_ms());
  return f;
}

v1::AgentMessage WorkerExitedMessage(int64_t generation, const WorkerExit& exit,
                                     const std::string& stack) {
  v1::AgentMessage message;
  v1::WorkerExited* m = message.mutable_worker_exited();
  m->mutable_header()->set_generation(generation);
  m->set_local_rank(exit.local_rank);
  if (exit.pid > 0) m->set_pid(exit.pid);
  switch (exit.kind) {
    case WorkerExit::Kind::kExited:
      m->set_exit_code(exit.exit_code);
      break;
    case WorkerExit::Kind::kSignaled:  // torchrun reports -N
      m->set_exit_code(-exit.signal);
      m->set_signal(exit.signal);
      break;
    case WorkerExit::Kind::kHung:  // non-zero so it never reads as success
      m->set_exit_code(-1);
      m->set_hang(true);
      m->set_process_stopped(exit.process_stopped);
      break;
  }
  std::string text = exit.error ? exit.error->message : std::string();
  if (text.empty() && !exit.succeeded()) text = exit.Describe();
  if (!stack.empty()) {
    absl::StrAppend(&text, "\nPython stack when the hang was declared:\n", stack);
  }
  m->set_error_message(Capped(text, kMaxErrorMessageBytes));
  m->set_time_unix_ms(absl::ToUnixMillis(FailureTime(exit)));
  // The worker's own words travel with it (stderr_tail.h): its error file's
  // traceback first (torch's @record), else the one found in its stderr.
  m->set_stderr_tail(exit.stderr_tail);
  const std::string& traceback = exit.error.has_value() && !exit.error->traceback.empty()
                                     ? exit.error->traceback
                                     : exit.stderr_traceback;
  m->set_traceback(traceback.size() <= kMaxTracebackBytes
                       ? traceback
                       : traceback.substr(traceback.size() - kMaxTracebackBytes));
  m->set_log_path(exit.stderr_log);
  return message;
}

Agent::Agent(AgentOptions options, const Clock& clock, CoordinatorLink* link)
    : options_(std::move(options)),
      clock_(clock),
      monotonic_clock_(options_.monotonic_clock != nullptr ? *options_.monotonic_clock
                                                           : MonotonicClock::Get()),
      link_(link),
      progress_(clock_, options_.progress),
      shutdown_timeout_(options_.launch.shutdown_timeout),
      notice_file_(options_.run_dir.empty() ? "" : options_.run_dir + "/preemption_notice.json"),
      lease_file_(options_.run_dir.empty() ? "" : options_.run_dir + "/lease.json") {
  lease_ = std::make_unique<WorkerLease>(
      monotonic_clock_, WorkerLease::Options{lease_file_},
      [this](bool freeze) {
        absl::MutexLock lock(&supervisor_mu_);
        if (!supervisor_) return;
        if (freeze) {
          supervisor_->Freeze();
        } else {
          supervisor_->Thaw();
        }
      },
      [this](int64_t) { link_->LeaseExpired(); });
  PrepareWorkerSite();
  StartStandbys();
}

Agent::~Agent() {
  StopWorkers("the agent is shutting down");
  lease_.reset();  // joins its thread before the members it uses go
  // After every worker it started stopped: its thread is their
  // PR_SET_PDEATHSIG parent.
  standby_pool_.reset();
}

void Agent::OnLeaseGranted(absl::Duration lease) { lease_->Configure(lease); }

void Agent::OnLeaseRenewed(absl::Time sent_at, int64_t running_generation) {
  lease_->Renewed(sent_at, running_generation);
}

bool Agent::Post(Event event) {
  absl::MutexLock lock(&mu_);
  if (done_) return false;
  queue_.push_back(std::move(event));
  return true;
}

int Agent::Run() {
  while (!exit_code_) {
    Event event;
    bool polled = false;
    {
      absl::MutexLock lock(&mu_);
      const absl::Condition has_event(
          +[](std::deque<Event>* q) { return !q->empty(); }, &queue_);
      const absl::Duration poll = PreemptionPollInterval();
      if (poll == absl::InfiniteDuration()) {
        mu_.Await(has_event);
      } else {
        polled = !mu_.AwaitWithTimeout(has_event, poll);
      }
      if (!polled) {
        event = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (polled) {
      PollPreemption();
    } else {
      Handle(event);
    }
  }
  StopWorkers("the agent is exiting");
  std::deque<Event> rest;
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    rest.swap(queue_);
  }
  for (Event& event : rest) {  // nobody will act on these: release waiters
    if (auto* fenced = std::get_if<FencedEvent>(&event)) fenced->done->Notify();
  }
  return *exit_code_;
}

void Agent::RequestShutdown(int signal) { Post(SignalEvent{signal}); }

void Agent::OnRegistered(const v1::Registered& registered, bool reconnected) {
  Post(RegisteredEvent{registered, reconnected});
}

void Agent::OnCoordinatorMessage(const v1::CoordinatorMessage& message) { Post(message); }

void Agent::OnFenced(const absl::Status& status) {
  absl::Notification done;
  if (Post(FencedEvent{status, &done})) done.WaitForNotification();
}

void Agent::OnSessionFailed(const absl::Status& status) { Post(SessionFailedEvent{status}); }

std::vector<v1::WorkerState> Agent::WorkerStates() {
  std::shared_ptr<WorkerSupervisor> supervisor;
  std::vector<std::optional<v1::WorkerProgress>> progress;
  {
    absl::MutexLock lock(&supervisor_mu_);
    supervisor = supervisor_;
    progress = progress_.Latest();
  }
  std::vector<v1::WorkerState> states;
  if (!supervisor) return states;
  const std::vector<WorkerState> workers = supervisor->Workers();
  std::vector<int64_t> idle_ms(workers.size(), 0);
  {
    absl::MutexLock lock(&supervisor_mu_);
    const absl::Time now = clock_.Now();
    for (size_t i = 0; i < workers.size(); ++i) {
      const WorkerState& w = workers[i];
      if (!w.idle_since.has_value() || w.exit || w.hung) {
        idle_ms_sent_.erase(w.local_rank);
        continue;
      }
      auto& [since, ms] = idle_ms_sent_[w.local_rank];
      if (since != *w.idle_since || ms <= 0) {
        since = *w.idle_since;
        ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(now - since));
      }
      idle_ms[i] = ms;
    }
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    const WorkerState& w = workers[i];
    v1::WorkerState state;
    state.set_local_rank(w.local_rank);
    state.set_pid(w.pid);
    state.set_heartbeat_age_ms(-1);  // the supervisor judges hangs itself
    state.set_idle_ms(idle_ms[i]);
    if (!w.exit && !w.hung) state.set_cpu_busy_permille(w.cpu_busy_permille);
    if (w.exit) {
      state.set_state(w.exit->during_stop   ? v1::WORKER_STOPPED
                      : w.exit->succeeded() ? v1::WORKER_SUCCEEDED
                                            : v1::WORKER_FAILED);
    } else if (w.hung) {
      state.set_state(v1::WORKER_FAILED);
    } else {
      state.set_state(w.running ? v1::WORKER_RUNNING : v1::WORKER_STARTING);
    }
    if (w.local_rank >= 0 && static_cast<size_t>(w.local_rank) < progress.size() &&
        progress[w.local_rank]) {
      *state.mutable_progress() = *std::move(progress[w.local_rank]);
    }
    states.push_back(std::move(state));
  }
  return states;
}

void Agent::Handle(Event& event) {
  if (auto* e = std::get_if<RegisteredEvent>(&event)) {
    HandleRegistered(*e);
  } else if (auto* m = std::get_if<v1::CoordinatorMessage>(&event)) {
    HandleMessage(*m);
  } else if (auto* x = std::get_if<ExitEvent>(&event)) {
    HandleExit(*x);
  } else if (auto* f = std::get_if<FencedEvent>(&event)) {
    StopWorkers(absl::StrCat("fenced: ", f->status.message()));
    generation_ = 0;
    exits_.clear();
    hang_stacks_.reset();
    master_answer_.reset();
    link_->SetGeneration(0);
    f->done->Notify();
  } else if (auto* s = std::get_if<SessionFailedEvent>(&event)) {
    DDP_LOG(ERROR) << "giving up: " << s->status;
    StopWorkers("the session with the coordinator failed");
    Finish(kExitCoordinatorError);
  } else if (auto* sig = std::get_if<SignalEvent>(&event)) {
    const absl::Duration grace = options_.launch.preemption_grace;
    if (sig->signal == SIGTERM && grace > absl::ZeroDuration() && !own_leave_at_ &&
        generation_ != 0) {
      BeginLeaving(grace, "the agent received SIGTERM", sig->signal);
      return;
    }
    DDP_LOG(WARNING) << "received signal " << sig->signal
                     << "; stopping the workers and leaving the job";
    // As torchrun: the workers get the signal the agent got (Ctrl-C arrives
    // as SIGINT, so a script's `except KeyboardInterrupt` runs; a closed
    // terminal's SIGHUP as SIGHUP).
    StopWorkers(absl::StrCat("signal ", sig->signal), sig->signal);
    v1::AgentMessage leave;
    leave.mutable_leave()->mutable_header()->set_generation(generation_);
    leave.mutable_leave()->set_reason(absl::StrCat("the agent received signal ", sig->signal));
    link_->Send(std::move(leave));
    Finish(kExitSignalBase + sig->signal);
  }
}

void Agent::HandleRegistered(const RegisteredEvent& event) {
  const v1::Registered& r = event.registered;
  if (r.settings().shutdown_timeout_ms() > 0) {
    shutdown_timeout_ = absl::Milliseconds(r.settings().shutdown_timeout_ms());
  }
  if (r.settings().has_hang_timeout_ms()) {
    job_hang_timeout_ = absl::Milliseconds(r.settings().hang_timeout_ms());
  }
  DDP_LOG(INFO) << "job " << options_.launch.job_id << ": " << v1::JobState_Name(r.state())
                << ", generation " << r.generation() << ", role " << v1::NodeRole_Name(r.role())
                << (r.created_job() ? " (this node created the job)" : "");
  if (!event.reconnected) return;
  if (r.resumed()) {
    // Reports sent just before the break may have been lost; the coordinator
    // takes repeats of a generation's exits in its stride. Only while that
    // generation is still the job's: a report of an older one would be
    // refused as stale (ABORTED, which fences this agent).
    if (r.generation() == generation_) {
      for (const WorkerExit& exit : exits_) {
        if (!exit.knock_on()) ReportExit(exit);
      }
      // So may a departure's: both are idempotent.
      if (own_leave_at_) SendPreempted();
      if (ready_reported_ && notice_generation_ == generation_) SendReadyToLeave();
    }
    return;
  }
  if (generation_ != 0) {
    StopWorkers("the coordinator no longer knew this node when it came back");
    generation_ = 0;
    exits_.clear();
    hang_stacks_.reset();
    link_->SetGeneration(0);
  }
}

void Agent::HandleMessage(const v1::CoordinatorMessage& message) {
  switch (message.body_case()) {
    case v1::CoordinatorMessage::kAssignment:
      HandleAssignment(message.assignment());
      break;
    case v1::CoordinatorMessage::kRequestMasterInfo:
      HandleRequestMasterInfo(message.request_master_info());
      break;
    case v1::CoordinatorMessage::kStopWorkers:
      HandleStopWorkers(message.stop_workers());
      break;
    case v1::CoordinatorMessage::kJobFinished:
      HandleJobFinished(message.job_finished());
      break;
    case v1::CoordinatorMessage::kNodeDismissed:
      HandleNodeDismissed(message.node_dismissed());
      break;
    case v1::CoordinatorMessage::kDrainNotice:
      HandleDrainNotice(message.drain_notice());
      break;
    case v1::CoordinatorMessage::kNotice:
      DDP_LOG(WARNING) << "from the coordinator: " << message.notice().message();
      break;
    case v1::CoordinatorMessage::kRequestStacks:
      HandleRequestStacks(message.request_stacks());
      break;
    case v1::CoordinatorMessage::kRegistered:  // only as a first answer
    default:
      DDP_LOG(WARNING) << "ignored unexpected message from the coordinator: "
                       << Capped(message.ShortDebugString(), 200);
      break;
  }
}

void Agent::HandleAssignment(const v1::Assignment& assignment) {
  if (assignment.generation() <= generation_) {
    DDP_LOG(DEBUG) << "assignment of generation " << assignment.generation()
                   << " ignored: generation " << generation_ << " is current";
    return;
  }
  absl::Status valid = ValidateAssignment(assignment);
  if (!valid.ok()) {
    DDP_LOG(ERROR) << valid;
    return;
  }
  if (!parked_.empty() && ResumeSurvivors(assignment)) return;
  StopWorkers(absl::StrCat("generation ", assignment.generation(), " starts"));
  StartWorkers(assignment);
}

void Agent::StartWorkers(const v1::Assignment& p) {
  if (!lease_->AwaitValid(shutdown_timeout_)) {
    DDP_LOG(WARNING) << "generation " << p.generation() << " starts without a valid lease: no "
                     << "heartbeat acknowledged lately; the lease will stop its workers";
  }
  ran_workers_ = true;
  generation_ = p.generation();
  local_world_size_ = p.local_world_size();
  ResetNotice();
  exits_.clear();
  hang_stacks_.reset();
  link_->SetGeneration(generation_);
  std::vector<WorkerSpec> specs;
  std::vector<std::string> progress_files;
  for (int local_rank = 0; local_rank < p.local_world_size(); ++local_rank) {
    specs.push_back(SpecFor(p, local_rank));
    progress_files.push_back(specs.back().files.progress_file);
  }
  WorkerSupervisor::Options supervisor_options = options_.supervisor;
  if (job_hang_timeout_) supervisor_options.hang_timeout = *job_hang_timeout_;
  // A node of a multi-node generation is not the whole job: the coordinator
  // declares an idle hang once every node is idle (idle_hang.h).
  supervisor_options.declare_idle_hangs = p.group_world_size() <= 1;
  if (standby_pool_ != nullptr) {
    supervisor_options.launch = [pool = standby_pool_.get()](const WorkerSpec& spec,
                                                             const WorkerStdio& stdio) {
      return pool->Launch(spec, stdio);
    };
  }
  if (options_.launch.in_process_restart) {
    for (int local_rank = 0; local_rank < p.local_world_size(); ++local_rank) {
      if (const RecoveryChannel* channel = ChannelOf(local_rank)) channel->Reset();
    }
  }
  supervised_generation_ = generation_;
  // An in-process restart moves the same supervisor to the next generation:
  // an exit belongs to the generation its worker runs when it is seen.
  auto supervisor = std::make_shared<WorkerSupervisor>(
      supervisor_options, clock_, [this](const WorkerExit& exit) {
        Post(ExitEvent{supervised_generation_.load(), exit});
      });
  {
    absl::MutexLock lock(&supervisor_mu_);
    supervisor_ = supervisor;
    progress_.Reset(std::move(progress_files));
    idle_ms_sent_.clear();
  }
  lease_->Arm(generation_);
  DDP_LOG(INFO) << "generation " << generation_ << ": starting " << p.local_world_size()
                << " workers, ranks [" << p.global_rank_offset() << ", "
                << p.global_rank_offset() + p.local_world_size() << ") of " << p.world_size()
                << ", group rank " << p.group_rank() << "/" << p.group_world_size() << ", master "
                << p.master_addr() << ":" << p.master_port() << ", restart " << p.restart_count();
  absl::Status started = supervisor->Start(std::move(specs));
  // The lease may have run out before this supervisor was installed (its
  // freeze reached the previous one, or none): freeze them now. One that runs
  // out during Start reaches this supervisor, which stops them once spawned.
  if (lease_->frozen()) supervisor->Freeze();
  if (!started.ok()) {
    DDP_LOG(ERROR) << "cannot start the workers of generation " << generation_ << ": " << started;
    StopWorkers("start failed");
    WorkerExit failure;
    failure.kind = WorkerExit::Kind::kExited;
    failure.exit_code = 1;
    failure.time = clock_.Now();
    failure.error = ErrorFileContent{std::string(started.message()), "", ""};
    exits_.push_back(failure);
    ReportExit(failure);
  }
}

void Agent::HandleRequestMasterInfo(const v1::RequestMasterInfo& request) {
  const int64_t g = request.generation();
  if (!master_answer_ || master_answer_->first != g) {
    absl::StatusOr<int> port = options_.pick_port ? options_.pick_port() : PickFreePort();
    if (!port.ok()) {
      DDP_LOG(ERROR) << "no free MASTER_PORT for generation " << g << ": " << port.status();
      return;  // the coordinator's timeout restarts the rendezvous
    }
    absl::StatusOr<std::string> id =
        options_.make_nccl_id ? options_.make_nccl_id() : GenerateNcclUniqueId();
    if (!id.ok()) {
      if (absl::IsNotFound(id.status())) {
        DDP_LOG(INFO) << "no NCCL here (" << id.status() << "); sending no id";
      } else {
        DDP_LOG(WARNING) << "no NCCL unique id: " << id.status();
      }
      id = std::string();
    }
    v1::AgentMessage message;
    v1::MasterInfo* info = message.mutable_master_info();
    info->mutable_header()->set_generation(g);
    info->set_master_addr(options_.master_addr);
    info->set_master_port(*port);
    info->set_nccl_unique_id(*id);
    master_answer_ = std::make_pair(g, message.master_info());
    DDP_LOG(INFO) << "generation " << g << ": this node is group rank 0; "
                  << "MASTER_PORT " << *port << ", NCCL id "
                  << (id->empty() ? "none" : "generated");
  }
  v1::AgentMessage message;
  *message.mutable_master_info() = master_answer_->second;
  link_->Send(std::move(message));
}

void Agent::HandleStopWorkers(const v1::StopWorkers& stop) {
  DDP_LOG(INFO) << "stopping the workers of generation " << stop.generation() << ": "
                << stop.reason();
  if (stop.generation() == generation_) {
    // A worker found stopped (SIGSTOP, a debugger) is what its peers hang
    // behind: report it, with that evidence, before the stop kills it and
    // the evidence with it, so that the coordinator blames it and not them.
    std::shared_ptr<WorkerSupervisor> supervisor;
    {
      absl::MutexLock lock(&supervisor_mu_);
      supervisor = supervisor_;
    }
    if (supervisor) {
      for (const WorkerExit& hang : supervisor->StoppedWorkers()) RecordExit(hang);
    }
    if (options_.launch.in_process_restart && ParkSurvivors()) {
      v1::AgentMessage message;
      message.mutable_workers_stopped()->mutable_header()->set_generation(stop.generation());
      link_->Send(std::move(message));
      return;
    }
  }
  if (stop.take_stacks() && stop.generation() == generation_) SendStacksAtHang();
  const std::vector<WorkerState> stopped = StopWorkers(stop.reason());
  if (stop.generation() == generation_) {
    // A worker that failed on its own but whose exit was seen only during
    // the stop (or is still queued) is a failure like any other, and maybe
    // the first one: report it before WorkersStopped, while the coordinator
    // still collects this generation's failures. Exits the stop caused are
    // no failures of the workers and are never reported.
    for (const WorkerState& w : stopped) {
      if (w.exit && !w.exit->succeeded() && !CausedByStop(*w.exit)) {
        RecordExit(*w.exit);
      }
    }
    if (!stopped.empty() && !PassesHealthChecksBetweenGenerations(stop.generation())) return;
  }
  v1::AgentMessage message;
  message.mutable_workers_stopped()->mutable_header()->set_generation(stop.generation());
  link_->Send(std::move(message));
}

bool Agent::PassesHealthChecksBetweenGenerations(int64_t generation) {
  if (options_.launch.health_checks.empty()) return true;
  const auto visible = options_.base_env.find("CUDA_VISIBLE_DEVICES");
  std::vector<v1::HealthCheckResult> results = RunNodeHealthChecks(
      options_.launch,
      NodeHealthCheckEnvironment(options_.launch, options_.run_dir,
                                 visible != options_.base_env.end() ? visible->second : ""),
      absl::StrCat("after generation ", generation), clock_);
  const v1::HealthCheckResult* failed = FirstFailedCheck(results);
  if (failed == nullptr) return true;
  const std::string why =
      absl::StrCat("its health check '", failed->name(), "' failed after generation ", generation,
                   ": ", CheckHeadline(failed->output()));
  DDP_LOG(ERROR) << "node " << options_.launch.node_id << " leaves job " << options_.launch.job_id
                 << ": " << why
                 << " (the next generation forms without it: a spare or waiting node takes its "
                    "place, or the job goes on smaller within --nnodes, or waits)";
  v1::AgentMessage leave;
  leave.mutable_leave()->mutable_header()->set_generation(generation);
  leave.mutable_leave()->set_reason(why);
  for (v1::HealthCheckResult& result : results) {
    *leave.mutable_leave()->add_health_checks() = std::move(result);
  }
  link_->Send(std::move(leave));
  Finish(kExitJobFailed);
  return false;
}

void Agent::HandleJobFinished(const v1::JobFinished& finished) {
  // Failures seen while stopping are not reported any more (the job is
  // over), but they belong in the summary.
  std::vector<WorkerExit> local = exits_;
  for (const WorkerState& w : StopWorkers("the job finished")) {
    if (!w.exit || w.exit->succeeded() || CausedByStop(*w.exit)) continue;
    const bool known = std::any_of(local.begin(), local.end(), [&](const WorkerExit& e) {
      return e.local_rank == w.exit->local_rank;
    });
    if (!known) local.push_back(*w.exit);
  }
  const std::string& job = options_.launch.job_id;
  if (finished.state() == v1::SUCCEEDED) {
    if (!ran_workers_) {
      DDP_LOG(WARNING) << "job " << job << " SUCCEEDED without this node: it waited as a hot "
                       << "spare and ran no worker (exit code " << kExitSpareUnused << ")";
      Finish(kExitSpareUnused);
      return;
    }
    DDP_LOG(INFO) << "job " << job << " SUCCEEDED: " << finished.message();
    Finish(kExitSucceeded);
    return;
  }
  std::vector<WorkerFailure> failures;
  const v1::Failure& root = finished.root_cause();
  const bool has_root = !root.node_id().empty();
  if (has_root) failures.push_back(FailureFromProto(root));
  for (const WorkerExit& exit : local) {
    if (exit.succeeded()) continue;
    const bool is_root = has_root && root.node_id() == options_.launch.node_id &&
                         root.generation() == generation_ && root.local_rank() == exit.local_rank;
    if (is_root) {
      // The local record knows more (silence, error file path, traceback).
      failures[0] = ToWorkerFailure(exit, options_.launch.node_id);
      failures[0].time = FailureFromProto(root).time;
    } else {
      failures.push_back(ToWorkerFailure(exit, options_.launch.node_id));
    }
  }
  std::string text;
  if (!failures.empty()) {
    // The coordinator's root cause is the job's, the same on every node.
    text = FormatFailureSummary(options_.launch.entrypoint, failures, has_root ? 0 : -1);
  }
  absl::StrAppend(&text, "job ", job, " ", v1::JobState_Name(finished.state()), ": ",
                  finished.message(), "\n");
  // A scheduler that gave the launcher its own TORCHELASTIC_ERROR_FILE
  // (TorchX, SageMaker) reads the root cause there, as torchrun writes it:
  // the first failure's own error file with its errorCode when that worker
  // is local and wrote one; else (torchrun writes nothing then) this summary.
  if (auto file = options_.base_env.find("TORCHELASTIC_ERROR_FILE");
      file != options_.base_env.end() && !file->second.empty()) {
    const int first = failures.empty() ? -1 : (has_root ? 0 : RootCauseIndex(failures));
    absl::Status copied = absl::NotFoundError("no local error file");
    if (first >= 0 && failures[first].node == options_.launch.node_id &&
        !failures[first].error_file.empty()) {
      const WorkerFailure& f = failures[first];
      copied = CopyWorkerErrorFile(f.error_file,
                                   f.kind == WorkerFailure::Kind::kSignal ? -f.signal : f.exit_code,
                                   file->second);
      if (!copied.ok()) DDP_LOG(WARNING) << copied;
    }
    const absl::Status written =
        copied.ok() ? copied
                    : WriteLauncherErrorFile(
                          file->second,
                          absl::StrCat("job ", job, " ", v1::JobState_Name(finished.state()), ": ",
                                       finished.message()),
                          text, clock_.Now());
    if (!written.ok()) DDP_LOG(WARNING) << written;
  }
  if (options_.print_summary) {
    options_.print_summary(text);
  } else {
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
  }
  Finish(kExitJobFailed);
}

void Agent::HandleExit(const ExitEvent& event) {
  // Exits after a stop began are sorted out by the stop's handler.
  if (event.generation != generation_ || event.exit.during_stop) return;
  RecordExit(event.exit);
}

void Agent::RecordExit(const WorkerExit& exit) {
  // A worker's first event of the generation is its fate (a hung worker's
  // later exit adds nothing).
  for (const WorkerExit& known : exits_) {
    if (known.local_rank == exit.local_rank) return;
  }
  if (IsCtrlCOnTerminal(exit)) {
    // Under torchrun the terminal's Ctrl-C reaches the launcher too, which
    // stops every worker and exits 130: the user's interrupt, not a failure
    // to restart from.
    DDP_LOG(INFO) << "worker " << exit.local_rank
                  << " was interrupted from the terminal (Ctrl-C): stopping as on SIGINT";
    RequestShutdown(SIGINT);
    return;
  }
  exits_.push_back(exit);
  if (exit.succeeded()) {
    DDP_LOG(INFO) << "worker " << exit.local_rank << " (rank " << exit.global_rank << ") exited 0";
  } else {
    DDP_LOG(WARNING) << OneLineFailure(ToWorkerFailure(exit, options_.launch.node_id));
  }
  // Every local worker's stack before anything is stopped: where the hung
  // rank is, and where its peers wait for it.
  std::string stack;
  if (exit.kind == WorkerExit::Kind::kHung) stack = LogStacksAtHang(exit);
  // A knock-on hang is a consequence of the reported one: not a failure of
  // its own, so it can never be taken for the root cause.
  if (!exit.knock_on()) ReportExit(exit, stack);
}

bool Agent::IsCtrlCOnTerminal(const WorkerExit& exit) const {
  // Every worker is in the terminal's foreground group (worker_supervisor.h):
  // whichever the Ctrl-C ends first tells.
  if (options_.supervisor.terminal_fd < 0) return false;
  return (exit.kind == WorkerExit::Kind::kSignaled && exit.signal == SIGINT) ||
         (exit.kind == WorkerExit::Kind::kExited && exit.exit_code == 128 + SIGINT);
}

void Agent::ReportExit(const WorkerExit& exit, const std::string& stack) {
  link_->Send(WorkerExitedMessage(generation_, exit, stack));
}

std::vector<WorkerState> Agent::StopWorkers(const std::string& why, int first_signal) {
  parked_.clear();
  std::shared_ptr<WorkerSupervisor> supervisor;
  {
    absl::MutexLock lock(&supervisor_mu_);
    supervisor = supervisor_;
  }
  if (!supervisor) return {};
  lease_->Stopping();
  absl::Status stopped = supervisor->Stop(shutdown_timeout_, first_signal);
  if (!stopped.ok()) {
    DDP_LOG(ERROR) << "stopping the workers (" << why << "): " << stopped;
  }
  std::vector<WorkerState> states = supervisor->Workers();
  {
    absl::MutexLock lock(&supervisor_mu_);
    supervisor_.reset();
  }
  lease_->Disarm();
  return states;
}

void Agent::Finish(int exit_code) { exit_code_ = exit_code; }

// ---- Drain and preemption ----

absl::Duration Agent::PreemptionPollInterval() const {
  const bool watching = (!options_.launch.preemption_notice_file.empty() && !cloud_notice_seen_) ||
                        own_leave_at_.has_value() || (notice_generation_ != 0 && !ready_reported_);
  return watching ? options_.launch.monitor_interval : absl::InfiniteDuration();
}

void Agent::PollPreemption() {
  const std::string& cloud_file = options_.launch.preemption_notice_file;
  if (!cloud_file.empty() && !cloud_notice_seen_) {
    const absl::Duration fallback = options_.launch.preemption_grace > absl::ZeroDuration()
                                        ? options_.launch.preemption_grace
                                        : kDefaultCloudNoticeGrace;
    if (std::optional<absl::Duration> grace = ReadCloudNotice(cloud_file, fallback)) {
      cloud_notice_seen_ = true;
      if (!own_leave_at_) {
        BeginLeaving(*grace, absl::StrCat("the preemption notice file ", cloud_file, " appeared"),
                     0);
      }
    }
  }
  if (own_leave_at_ && clock_.Now() >= *own_leave_at_) {
    DDP_LOG(WARNING) << "the preemption grace is over: stopping the workers and leaving the job";
    StopWorkers("preemption deadline", leave_signal_ != 0 ? leave_signal_ : SIGTERM);
    v1::AgentMessage leave;
    leave.mutable_leave()->mutable_header()->set_generation(generation_);
    leave.mutable_leave()->set_reason(absl::StrCat("preempted: ", own_leave_reason_));
    link_->Send(std::move(leave));
    Finish(leave_signal_ != 0 ? kExitSignalBase + leave_signal_ : kExitDrained);
    return;
  }
  if (notice_generation_ != 0 && notice_generation_ == generation_ && !ready_reported_) {
    std::vector<std::string> ready_files;
    for (int local_rank = 0; local_rank < local_world_size_; ++local_rank) {
      ready_files.push_back(
          WorkerFilesFor(options_.run_dir, generation_, local_rank).ready_to_leave_file);
    }
    if (AllReadyToLeave(ready_files)) {
      DDP_LOG(INFO) << "every local worker of generation " << generation_
                    << " is ready to leave; telling the coordinator";
      SendReadyToLeave();
      ready_reported_ = true;
    }
  }
}

void Agent::BeginLeaving(absl::Duration grace, const std::string& reason, int signal) {
  own_leave_at_ = clock_.Now() + grace;
  own_leave_reason_ = reason;
  leave_signal_ = signal;
  DDP_LOG(WARNING) << reason << ": this node leaves the job within " << absl::FormatDuration(grace)
                   << "; its workers get the preemption notice (a second SIGTERM stops them now)";
  NoticeWorkers(options_.launch.node_id, *own_leave_at_, reason);
  SendPreempted();
}

void Agent::SendPreempted() {
  v1::AgentMessage preempted;
  preempted.mutable_preempted()->mutable_header()->set_generation(generation_);
  preempted.mutable_preempted()->set_leave_at_unix_ms(absl::ToUnixMillis(*own_leave_at_));
  preempted.mutable_preempted()->set_reason(own_leave_reason_);
  link_->Send(std::move(preempted));
}

void Agent::SendReadyToLeave() {
  v1::AgentMessage ready;
  ready.mutable_ready_to_leave()->mutable_header()->set_generation(generation_);
  link_->Send(std::move(ready));
}

void Agent::NoticeWorkers(const std::string& node_id, absl::Time leaves_at,
                          const std::string& reason) {
  if (generation_ == 0 || notice_file_.empty()) return;
  absl::Status written = WritePreemptionNotice(
      notice_file_, PreemptionNotice{node_id, leaves_at, reason, generation_});
  if (!written.ok()) {
    DDP_LOG(ERROR) << "the workers get no preemption notice: " << written;
    return;
  }
  notice_generation_ = generation_;
  ready_reported_ = false;
}

void Agent::ResetNotice() {
  if (!notice_file_.empty()) unlink(notice_file_.c_str());
  notice_generation_ = 0;
  ready_reported_ = false;
  if (own_leave_at_) {
    // This node still leaves (the coordinator may have forgotten it: a
    // restart): its new workers get the notice, the coordinator hears again.
    const absl::Duration left = std::max(absl::ZeroDuration(), *own_leave_at_ - clock_.Now());
    const absl::Time leave_at = *own_leave_at_;
    BeginLeaving(left, own_leave_reason_, leave_signal_);
    own_leave_at_ = leave_at;
  }
}

void Agent::HandleDrainNotice(const v1::DrainNotice& notice) {
  DDP_LOG(WARNING) << "node " << notice.node_id() << " leaves the job by "
                   << absl::FormatTime(absl::FromUnixMillis(notice.leave_at_unix_ms()))
                   << " at the latest (" << notice.reason()
                   << "); the workers get the preemption notice";
  if (notice.generation() != generation_) return;  // not these workers' generation
  NoticeWorkers(notice.node_id(), absl::FromUnixMillis(notice.leave_at_unix_ms()), notice.reason());
}

void Agent::HandleNodeDismissed(const v1::NodeDismissed& dismissed) {
  if (!dismissed.drained()) {
    DDP_LOG(ERROR) << "the coordinator dismissed this node: " << dismissed.reason();
    StopWorkers("node dismissed");
    Finish(kExitJobFailed);
    return;
  }
  DDP_LOG(WARNING) << "this node left the job: " << dismissed.reason();
  StopWorkers("drained", leave_signal_ != 0 ? leave_signal_ : SIGTERM);
  Finish(leave_signal_ != 0 ? kExitSignalBase + leave_signal_ : kExitDrained);
}

}  // namespace ddp::client
