// The agent's side of an in-process restart (--in-process-restart): the
// surviving workers of a failed generation keep their processes and join the
// next one; only the other slots start a worker (client/recovery_channel.h).

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/agent/agent.h"
#include "client/worker_failure.h"
#include "common/logging.h"

namespace ddp::client {
namespace {

// How often the survivors' state files are read while they leave the group.
constexpr absl::Duration kParkPollPeriod = absl::Milliseconds(2);
// The least a worker that did not park gets between SIGTERM and SIGKILL.
constexpr absl::Duration kMinStopTime = absl::Milliseconds(100);

bool Contains(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

}  // namespace

std::string Agent::RecoveryDirOf(int local_rank) const {
  return absl::StrCat(options_.run_dir, "/recovery/", local_rank);
}

const RecoveryChannel* Agent::ChannelOf(int local_rank) {
  if (auto it = channels_.find(local_rank); it != channels_.end()) return &it->second;
  if (options_.run_dir.empty()) return nullptr;
  absl::StatusOr<RecoveryChannel> channel = RecoveryChannel::Open(RecoveryDirOf(local_rank));
  if (!channel.ok()) {
    DDP_LOG(WARNING) << "no in-process restart for local rank " << local_rank << ": "
                     << channel.status();
    return nullptr;
  }
  return &channels_.emplace(local_rank, *std::move(channel)).first->second;
}

bool Agent::ParkSurvivors() {
  std::shared_ptr<WorkerSupervisor> supervisor;
  {
    absl::MutexLock lock(&supervisor_mu_);
    supervisor = supervisor_;
  }
  // Frozen workers (the lease ran out) may belong to a superseded generation:
  // they never run again.
  if (!supervisor || supervisor->frozen()) return false;
  const absl::Time began = MonotonicClock::Get().Now();
  const std::vector<WorkerState> workers = supervisor->Workers();
  std::map<int, pid_t> notified;
  for (const WorkerState& w : workers) {
    if (!w.running || w.hung || w.exit) continue;
    const RecoveryChannel* channel = ChannelOf(w.local_rank);
    if (channel == nullptr) continue;
    // Only a worker that said it runs this generation under the wrapper.
    const std::optional<RecoveryReport> report = channel->Read();
    if (!report || report->pid != w.pid || report->state != RecoveryReport::State::kRunning ||
        report->generation != generation_) {
      continue;
    }
    if (absl::Status sent = channel->Send(AbandonMessage(generation_)); !sent.ok()) {
      DDP_LOG(WARNING) << "local rank " << w.local_rank << " cannot be kept: " << sent;
      continue;
    }
    notified[w.local_rank] = w.pid;
  }
  if (notified.empty()) return false;

  // Real waits for real processes: on CLOCK_MONOTONIC (as WorkerSupervisor's
  // stop). The coordinator's stop barrier gives the whole stop the job's
  // shutdown timeout: the survivors get at most half of it, the workers
  // stopped after them the rest.
  const Clock& monotonic = MonotonicClock::Get();
  const absl::Duration park_budget =
      std::min(options_.launch.in_process_restart_timeout, shutdown_timeout_ / 2);
  const absl::Time park_deadline = began + park_budget;
  std::vector<int> parked;
  while (true) {
    parked.clear();
    for (const auto& [local_rank, pid] : notified) {
      const std::optional<RecoveryReport> report = channels_.at(local_rank).Read();
      if (report && report->pid == pid && report->state == RecoveryReport::State::kParked &&
          report->generation == generation_) {
        parked.push_back(local_rank);
      }
    }
    if (parked.size() == notified.size() || monotonic.Now() >= park_deadline) break;
    absl::SleepFor(kParkPollPeriod);
  }
  if (parked.empty()) {
    DDP_LOG(WARNING) << "generation " << generation_ << ": no worker left the process group within "
                     << absl::FormatDuration(park_budget)
                     << " (--in-process-restart-timeout, at most half of the shutdown timeout): "
                     << "every worker starts again";
    return false;
  }

  std::vector<int> others;
  for (const WorkerState& w : workers) {
    if (!Contains(parked, w.local_rank)) others.push_back(w.local_rank);
  }
  lease_->Stopping();
  if (!others.empty()) {
    const absl::Duration left =
        std::max(shutdown_timeout_ - (monotonic.Now() - began), kMinStopTime);
    if (absl::Status stopped = supervisor->StopRanks(others, left); !stopped.ok()) {
      DDP_LOG(ERROR) << "stopping local ranks " << absl::StrJoin(others, ",") << ": " << stopped;
    }
  }
  // As HandleStopWorkers: a failure of their own seen only now is reported.
  for (const WorkerState& w : supervisor->Workers()) {
    if (Contains(others, w.local_rank) && w.exit && !w.exit->succeeded() &&
        !CausedByStop(*w.exit)) {
      RecordExit(*w.exit);
    }
  }
  lease_->Disarm();
  parked_ = parked;
  DDP_LOG(INFO) << "generation " << generation_ << ": in-process restart: local ranks "
                << absl::StrJoin(parked, ",") << " left the process group and wait for the next "
                << "generation (" << absl::FormatDuration(monotonic.Now() - began) << ")"
                << (others.empty() ? "" : "; stopped local ranks ") << absl::StrJoin(others, ",");
  return true;
}

bool Agent::ResumeSurvivors(const v1::Assignment& p) {
  std::shared_ptr<WorkerSupervisor> supervisor;
  {
    absl::MutexLock lock(&supervisor_mu_);
    supervisor = supervisor_;
  }
  if (!supervisor) return false;
  if (static_cast<int64_t>(supervisor->Workers().size()) != p.local_world_size()) {
    DDP_LOG(INFO) << "generation " << p.generation() << " runs " << p.local_world_size()
                  << " workers here, not " << supervisor->Workers().size()
                  << ": every worker starts again";
    return false;
  }
  if (!lease_->AwaitValid(shutdown_timeout_)) {
    DDP_LOG(WARNING) << "generation " << p.generation() << " starts without a valid lease: no "
                     << "heartbeat acknowledged lately; the lease will stop its workers";
  }
  ran_workers_ = true;
  generation_ = p.generation();
  exits_.clear();
  hang_stacks_.reset();
  link_->SetGeneration(generation_);
  supervised_generation_ = generation_;
  std::vector<WorkerSpec> specs;
  std::vector<std::string> progress_files;
  for (int local_rank = 0; local_rank < p.local_world_size(); ++local_rank) {
    specs.push_back(SpecFor(p, local_rank));
    progress_files.push_back(specs.back().files.progress_file);
  }
  {
    absl::MutexLock lock(&supervisor_mu_);
    progress_.Reset(std::move(progress_files));
  }
  lease_->Arm(generation_);
  std::vector<int> kept;
  std::vector<int> started;
  for (WorkerSpec& spec : specs) {
    const int local_rank = spec.local_rank;
    const RecoveryChannel* channel = ChannelOf(local_rank);
    if (Contains(parked_, local_rank) && channel != nullptr) {
      absl::Status joined = supervisor->Reassign(spec);
      if (joined.ok()) joined = channel->Send(JoinMessage(generation_, spec.env));
      if (joined.ok()) {
        kept.push_back(local_rank);
        continue;
      }
      DDP_LOG(WARNING) << "local rank " << local_rank << " cannot rejoin: " << joined
                       << "; it starts again";
      (void)supervisor->StopRanks({local_rank}, shutdown_timeout_);
    }
    if (channel != nullptr) channel->Reset();
    // The survivors' wrapper (ddp_coordinator.recovery) is this rank's too: it waits for
    // rank 0's store itself, so its start need not wait for it (a survivor's store comes
    // up while the standby runs the script's first lines).
    spec.await_master = false;
    absl::Status spawned = supervisor->Replace(std::move(spec));
    if (spawned.ok()) {
      started.push_back(local_rank);
      continue;
    }
    DDP_LOG(ERROR) << "cannot start local rank " << local_rank << " of generation " << generation_
                   << ": " << spawned;
    WorkerExit failure;
    failure.local_rank = local_rank;
    failure.kind = WorkerExit::Kind::kExited;
    failure.exit_code = 1;
    failure.time = clock_.Now();
    failure.error = ErrorFileContent{std::string(spawned.message()), "", ""};
    exits_.push_back(failure);
    ReportExit(failure);
  }
  parked_.clear();
  if (lease_->frozen()) supervisor->Freeze();
  DDP_LOG(INFO) << "generation " << generation_ << ": in-process restart: ranks ["
                << p.global_rank_offset() << ", " << p.global_rank_offset() + p.local_world_size()
                << ") of " << p.world_size() << ", master " << p.master_addr() << ":"
                << p.master_port() << ", restart " << p.restart_count() << "; kept local ranks "
                << absl::StrJoin(kept, ",") << ", started " << absl::StrJoin(started, ",");
  return true;
}

}  // namespace ddp::client
