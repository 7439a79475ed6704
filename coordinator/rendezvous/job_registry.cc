#include "coordinator/rendezvous/job_registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace ddp::rendezvous {
namespace {

void AppendOutbox(Outbox& from, Outbox& to) {
  for (auto& m : from.messages) to.messages.push_back(std::move(m));
  for (auto& e : from.events) to.events.push_back(std::move(e));
  from.messages.clear();
  from.events.clear();
}

// The Registered reply goes before what the registration made the job send
// (an assignment, a request for master info): the session's first message.
void InsertRegistered(const RegisterRequest& request, const RegisterResult& result, size_t at,
                      Outbox& outbox) {
  OutboundMessage reply{request.job_id, request.node_id, request.incarnation, Registered{result}};
  outbox.messages.insert(outbox.messages.begin() + static_cast<std::ptrdiff_t>(at),
                         std::move(reply));
}

}  // namespace

JobRegistry::JobRegistry(const Clock& clock, JobStateStore* store, JobRegistryOptions options)
    : clock_(clock), store_(store), options_(std::move(options)) {}

absl::Status JobRegistry::Restore() {
  if (store_ == nullptr) return absl::OkStatus();
  DDP_ASSIGN_OR_RETURN(std::vector<JobSnapshot> snapshots, store_->LoadAll());
  absl::MutexLock lock(&mu_);
  if (!jobs_.empty()) {
    return absl::FailedPreconditionError("Restore must run before any job is created");
  }
  for (const JobSnapshot& snapshot : snapshots) {
    DDP_ASSIGN_OR_RETURN(std::unique_ptr<Job> job,
                         Job::Restore(snapshot, options_.limits, clock_, &outbox_));
    std::string id = job->id();
    // Stored events are durable (and no longer retained).
    taken_event_index_[id] = job->Status(false).last_event_index();
    if (!snapshot.past_runs.empty()) past_runs_[id] = snapshot.past_runs;
    jobs_.emplace(std::move(id), std::move(job));
  }
  DDP_LOG(INFO) << "restored " << jobs_.size() << " jobs";
  return absl::OkStatus();
}

absl::StatusOr<Job*> JobRegistry::FindJobLocked(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("job '", Capped(job_id),
                                            "' does not exist; create it or register "
                                            "with settings"));
  }
  return it->second.get();
}

void JobRegistry::QueueChangesLocked(Job& job) {
  if (!job.HasChanges()) return;  // heartbeats
  JobChanges changes = job.TakeChanges();
  if (store_ == nullptr) return;
  write_queue_.Add(std::move(changes));
}

void JobRegistry::AfterChangeLocked(Job& job) {
  QueueChangesLocked(job);
  write_queue_.Hold(outbox_);
}

// Reads the registry's state under the lock it takes (the initializers run
// after Lock()).
JobRegistry::ChangeScope::ChangeScope(JobRegistry* registry)
    : registry_((registry->mu_.Lock(), registry)),
      outbox_was_empty_(registry->outbox_.empty()),
      had_pending_(registry->write_queue_.has_pending()) {}

JobRegistry::ChangeScope::~ChangeScope() {
  const bool outbox = outbox_was_empty_ && !registry_->outbox_.empty();
  const bool pending = !had_pending_ && registry_->write_queue_.has_pending();
  registry_->mu_.Unlock();
  const JobRegistryOptions& options = registry_->options_;
  if (outbox && options.on_outbox) options.on_outbox();
  if (pending && options.on_pending) options.on_pending();
}

absl::Status JobRegistry::RunLocked(const std::string& job_id,
                                    const std::function<absl::Status(Job&)>& op) {
  DDP_ASSIGN_OR_RETURN(Job * job, FindJobLocked(job_id));
  absl::Status status = op(*job);
  AfterChangeLocked(*job);
  return status;
}

absl::Status JobRegistry::Run(const std::string& job_id,
                              const std::function<absl::Status(Job&)>& op) {
  ChangeScope locked(this);
  return RunLocked(job_id, op);
}

absl::Status JobRegistry::CheckWritable() const {
  if (!options_.write_check) return absl::OkStatus();
  return options_.write_check();
}

absl::Status JobRegistry::AwaitOwnChanges(absl::Status status) {
  if (!status.ok() || store_ == nullptr) return status;
  absl::Status durable = AwaitDurable(DurabilityMark(), options_.write_timeout);
  if (durable.ok()) return durable;
  return absl::UnknownError(absl::StrCat(
      "the outcome of this change is unknown: it was made but is not durable after ",
      absl::FormatDuration(options_.write_timeout),
      " (the job database is not accepting writes). It stays queued: it takes effect if the "
      "database recovers and is lost if the coordinator restarts first; GetJob shows it only "
      "once durable. Check the coordinator's log and disk"));
}

absl::StatusOr<v1::Job> JobRegistry::CreateJob(const std::string& job_id,
                                               const JobSettings& settings,
                                               const std::string& token_hash) {
  absl::Status status = ValidateId(job_id, "job id", options_.limits);
  if (!status.ok()) return status;
  status = ValidateJobSettings(settings, options_.limits);
  if (!status.ok()) return status;
  DDP_RETURN_IF_ERROR(CheckWritable());
  absl::StatusOr<v1::Job> result;
  {
    ChangeScope locked(this);
    auto existing = jobs_.find(job_id);
    if (existing != jobs_.end() && !IsTerminal(existing->second->state())) {
      return absl::AlreadyExistsError(absl::StrCat("job '", job_id, "' already exists"));
    }
    int run = 1;
    if (existing != jobs_.end()) {
      // A scheduler requeueing with a fixed id: a new run of a finished job.
      DDP_LOG(INFO) << "job " << job_id << " finished (" << JobStateName(existing->second->state())
                    << "); CreateJob starts a new run";
      run = StartNewRunLocked(job_id);
    }
    if (static_cast<int>(jobs_.size()) >= options_.max_jobs) {
      return absl::ResourceExhaustedError(absl::StrCat("the coordinator holds ", jobs_.size(),
                                                       " jobs, the limit; remove "
                                                       "finished jobs first"));
    }
    auto job = std::make_unique<Job>(job_id, settings, options_.limits, clock_, &outbox_);
    job->set_run(run);
    if (!token_hash.empty()) job->SetTokenHash(token_hash);
    Job& ref = *job;
    jobs_.emplace(job_id, std::move(job));
    AfterChangeLocked(ref);
    result = ref.Status(false);
  }
  status = AwaitOwnChanges(absl::OkStatus());
  if (!status.ok()) return status;
  return result;
}

absl::StatusOr<RegisterResult> JobRegistry::Register(const RegisterRequest& request) {
  // The job id and the agent's settings are checked here, once; the rest of
  // the request by Job::Register.
  absl::Status status = ValidateId(request.job_id, "job id", options_.limits);
  if (!status.ok()) return status;
  if (request.settings)
    DDP_RETURN_IF_ERROR(ValidateJobSettings(*request.settings, options_.limits));
  if (options_.serving_check) DDP_RETURN_IF_ERROR(options_.serving_check());
  absl::StatusOr<RegisterResult> result;
  {
    ChangeScope locked(this);
    auto it = jobs_.find(request.job_id);
    // A new agent with its flags for a finished job id (a rerun, a scheduler's
    // requeue with a fixed id): a new run of the job, which replaces the
    // finished one once its first registration is accepted. An agent of the
    // finished run that resumes is told the run is over instead.
    const bool new_run = it != jobs_.end() && IsTerminal(it->second->state()) && request.settings &&
                         !it->second->HasIncarnation(request.node_id, request.incarnation);
    // A rerun started by an agent keeps the job's token (CreateJob issues a
    // new one).
    const std::string inherited_token_hash = new_run ? it->second->token_hash() : "";
    if (new_run) it = jobs_.end();
    if (it != jobs_.end()) {
      const size_t first_new = outbox_.messages.size();
      result = it->second->Register(request);
      if (result.ok()) InsertRegistered(request, *result, first_new, outbox_);
      AfterChangeLocked(*it->second);
    } else {
      if (!request.settings) {
        return absl::NotFoundError(
            absl::StrCat("job '", request.job_id, "' does not exist and node '",
                         Capped(request.node_id), "' sent no settings to create it"));
      }
      if (!new_run && static_cast<int>(jobs_.size()) >= options_.max_jobs) {
        return absl::ResourceExhaustedError(absl::StrCat("the coordinator holds ", jobs_.size(),
                                                         " jobs, the limit; cannot create job '",
                                                         request.job_id, "'"));
      }
      // Build the job aside so that a rejected first registration leaves
      // nothing (and the finished run in place).
      Outbox scratch;
      auto job = std::make_unique<Job>(request.job_id, *request.settings, options_.limits, clock_,
                                       &scratch);
      result = job->Register(request);
      if (!result.ok()) return result.status();
      if (new_run) {
        job->set_run(StartNewRunLocked(request.job_id));
        if (!inherited_token_hash.empty()) job->SetTokenHash(inherited_token_hash);
        DDP_LOG(INFO) << "job " << request.job_id << " had finished; node "
                      << Capped(request.node_id) << " starts run " << job->run();
      }
      result->created_job = true;
      InsertRegistered(request, *result, 0, scratch);
      job->set_outbox(&outbox_);
      AppendOutbox(scratch, outbox_);
      Job& ref = *job;
      jobs_.emplace(request.job_id, std::move(job));
      AfterChangeLocked(ref);
    }
  }
  return result;
}

absl::Status JobRegistry::UpdateJob(const std::string& job_id, int min_nodes, int max_nodes) {
  DDP_RETURN_IF_ERROR(CheckWritable());
  return AwaitOwnChanges(Run(job_id, [&](Job& job) { return job.Update(min_nodes, max_nodes); }));
}

absl::Status JobRegistry::CancelJob(const std::string& job_id, const std::string& reason) {
  DDP_RETURN_IF_ERROR(CheckWritable());
  return AwaitOwnChanges(Run(job_id, [&](Job& job) { return job.Cancel(reason); }));
}

absl::Status JobRegistry::SetJobTokenHash(const std::string& job_id,
                                          const std::string& token_hash) {
  DDP_RETURN_IF_ERROR(CheckWritable());
  return AwaitOwnChanges(Run(job_id, [&](Job& job) {
    job.SetTokenHash(token_hash);
    return absl::OkStatus();
  }));
}

std::vector<std::pair<std::string, std::string>> JobRegistry::JobTokenHashes() const {
  std::vector<std::pair<std::string, std::string>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, job] : jobs_) {
    if (!job->token_hash().empty()) out.emplace_back(id, job->token_hash());
  }
  return out;
}

absl::Status JobRegistry::ExcludeNode(const std::string& job_id, const std::string& node_id,
                                      const std::string& reason) {
  DDP_RETURN_IF_ERROR(CheckWritable());
  return AwaitOwnChanges(Run(job_id, [&](Job& job) { return job.ExcludeNode(node_id, reason); }));
}

absl::StatusOr<std::vector<std::string>> JobRegistry::DrainNode(const std::string& node_id,
                                                                const std::string& job_id,
                                                                absl::Time leaves_at,
                                                                const std::string& reason) {
  DDP_RETURN_IF_ERROR(CheckWritable());
  DDP_RETURN_IF_ERROR(ValidateId(node_id, "node id", options_.limits));
  std::vector<std::string> drained;
  absl::Status status;
  {
    ChangeScope locked(this);
    if (!job_id.empty()) {
      status =
          RunLocked(job_id, [&](Job& job) { return job.DrainNode(node_id, leaves_at, reason); });
      if (status.ok()) drained.push_back(job_id);
    } else {
      for (auto& [id, job] : jobs_) {
        if (IsTerminal(job->state()) || !job->HasNode(node_id)) continue;
        status.Update(job->DrainNode(node_id, leaves_at, reason));
        AfterChangeLocked(*job);
        drained.push_back(id);
      }
      if (drained.empty()) {
        status = absl::NotFoundError(
            absl::StrCat("node '", Capped(node_id), "' is registered in no running job"));
      }
    }
  }
  DDP_RETURN_IF_ERROR(AwaitOwnChanges(status));
  return drained;
}

int JobRegistry::StartNewRunLocked(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  JobRecord finished = it->second->Record();
  // What a past run keeps (as the store keeps it): its root cause and failure
  // history, no exclusions, no nodes, no events.
  finished.clear_excluded_nodes();
  const int next = finished.run() + 1;
  std::vector<JobRecord>& runs = past_runs_[job_id];
  runs.push_back(finished);
  const int keep = std::max(1, options_.limits.max_past_runs);
  if (static_cast<int>(runs.size()) > keep) runs.erase(runs.begin(), runs.end() - keep);
  jobs_.erase(it);
  taken_event_index_.erase(job_id);
  if (store_ != nullptr) {
    JobChanges changes;
    changes.job_id = job_id;
    changes.job_removed = true;
    changes.keep_runs_from = runs.front().run();
    changes.archived_run = std::move(finished);
    write_queue_.Add(std::move(changes));
  }
  return next;
}

void JobRegistry::ForgetLocked(const std::string& job_id) {
  jobs_.erase(job_id);
  taken_event_index_.erase(job_id);
  past_runs_.erase(job_id);
  if (store_ == nullptr) return;
  JobChanges changes;
  changes.job_id = job_id;
  changes.job_removed = true;
  write_queue_.Add(std::move(changes));
}

absl::Status JobRegistry::RemoveJob(const std::string& job_id) {
  DDP_RETURN_IF_ERROR(CheckWritable());
  {
    ChangeScope locked(this);
    DDP_ASSIGN_OR_RETURN(Job * job, FindJobLocked(job_id));
    if (!IsTerminal(job->state())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job '", job_id, "' is ", JobStateName(job->state()), "; cancel it before removing it"));
    }
    ForgetLocked(job_id);
  }
  return AwaitOwnChanges(absl::OkStatus());
}

template <typename T>
absl::StatusOr<T> JobRegistry::DurableRead(uint64_t mark, absl::StatusOr<T> read) const {
  if (store_ == nullptr) return read;
  absl::Status durable = AwaitDurable(mark, options_.read_timeout);
  if (!durable.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "the job state is not durable yet after ", absl::FormatDuration(options_.read_timeout),
        " (the job database is not accepting writes), so it is not shown; retry later, and "
        "check the coordinator's log and disk"));
  }
  // Linearizable: the state was read before this check, so a coordinator
  // that still leads now read the latest (a deposed one refuses).
  if (options_.serving_check) DDP_RETURN_IF_ERROR(options_.serving_check());
  return read;
}

absl::StatusOr<v1::Job> JobRegistry::GetJob(const std::string& job_id, bool include_nodes,
                                            int run) const {
  absl::StatusOr<v1::Job> read;
  uint64_t mark = 0;
  {
    absl::MutexLock lock(&mu_);
    mark = write_queue_.Mark();
    absl::StatusOr<Job*> job = FindJobLocked(job_id);
    if (run == 0 || (job.ok() && (*job)->run() == run)) {
      read = job.ok() ? absl::StatusOr<v1::Job>((*job)->Status(include_nodes)) : job.status();
    } else {
      read = PastRunLocked(job_id, run, job.ok() ? (*job)->run() : 0);
    }
  }
  return DurableRead(mark, std::move(read));
}

absl::StatusOr<v1::Job> JobRegistry::PastRunLocked(const std::string& job_id, int run,
                                                   int current_run) const {
  auto runs = past_runs_.find(job_id);
  if (runs != past_runs_.end()) {
    for (const JobRecord& record : runs->second) {
      if (record.run() == run) return ApiJobOf(record);
    }
  }
  std::string kept = current_run == 0 ? "none" : absl::StrCat(current_run, " (current)");
  if (runs != past_runs_.end() && !runs->second.empty()) {
    kept = absl::StrCat(runs->second.front().run(), "..", runs->second.back().run(), " (past)",
                        current_run == 0 ? "" : absl::StrCat(" and ", kept));
  }
  return absl::NotFoundError(absl::StrCat("job '", Capped(job_id), "' has no run ", run,
                                          "; runs kept: ", kept, " (at most ",
                                          options_.limits.max_past_runs, " past runs are kept)"));
}

absl::StatusOr<v1::Job> JobRegistry::GetJobIncludingPending(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  DDP_ASSIGN_OR_RETURN(Job * job, FindJobLocked(job_id));
  return job->Status(/*include_nodes=*/false);
}

absl::StatusOr<std::vector<v1::Job>> JobRegistry::ListJobs(bool include_past_runs) const {
  std::vector<v1::Job> out;
  uint64_t mark = 0;
  {
    absl::MutexLock lock(&mu_);
    mark = write_queue_.Mark();
    out.reserve(jobs_.size());
    for (const auto& [id, job] : jobs_) {
      out.push_back(job->Status(false));
      if (!include_past_runs) continue;
      auto runs = past_runs_.find(id);
      if (runs == past_runs_.end()) continue;
      for (const JobRecord& record : runs->second) out.push_back(ApiJobOf(record));
    }
  }
  return DurableRead(mark, absl::StatusOr<std::vector<v1::Job>>(std::move(out)));
}

absl::StatusOr<std::vector<JobEvent>> JobRegistry::EventsSince(const std::string& job_id,
                                                               int64_t after_index,
                                                               int limit) const {
  absl::StatusOr<std::vector<JobEvent>> events;
  {
    absl::MutexLock lock(&mu_);
    DDP_ASSIGN_OR_RETURN(Job * job, FindJobLocked(job_id));
    events = job->EventsSince(after_index, limit);
    if (!events.ok() || store_ == nullptr) return events;
    auto taken = taken_event_index_.find(job_id);
    const int64_t cap = taken == taken_event_index_.end() ? 0 : taken->second;
    while (!events->empty() && events->back().index() > cap) events->pop_back();
  }
  if (options_.serving_check) DDP_RETURN_IF_ERROR(options_.serving_check());
  return events;
}

absl::StatusOr<Generation> JobRegistry::Heartbeat(const NodeRef& ref) {
  if (options_.serving_check) DDP_RETURN_IF_ERROR(options_.serving_check());
  Generation running = 0;
  absl::Status status = Run(ref.job_id, [&](Job& job) {
    DDP_ASSIGN_OR_RETURN(Generation generation, job.Heartbeat(ref));
    running = generation;
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return running;
}

absl::Status JobRegistry::ReportProgress(const NodeRef& ref, std::vector<WorkerProgress> progress) {
  return Run(ref.job_id, [&](Job& job) { return job.ReportProgress(ref, std::move(progress)); });
}

absl::Status JobRegistry::ReportActivity(const NodeRef& ref, std::vector<WorkerActivity> workers) {
  return Run(ref.job_id, [&](Job& job) { return job.ReportActivity(ref, std::move(workers)); });
}

absl::Status JobRegistry::WorkerExited(const NodeRef& ref, const WorkerExit& exit) {
  return Run(ref.job_id, [&](Job& job) { return job.WorkerExited(ref, exit); });
}

absl::Status JobRegistry::WorkersStopped(const NodeRef& ref) {
  return Run(ref.job_id, [&](Job& job) { return job.WorkersStopped(ref); });
}

absl::Status JobRegistry::ReportMasterInfo(const NodeRef& ref, const MasterInfo& info) {
  return Run(ref.job_id, [&](Job& job) { return job.ReportMasterInfo(ref, info); });
}

absl::Status JobRegistry::StreamClosed(const NodeRef& ref) {
  return Run(ref.job_id, [&](Job& job) { return job.StreamClosed(ref); });
}

absl::Status JobRegistry::Leave(const NodeRef& ref) {
  return Run(ref.job_id, [&](Job& job) { return job.Leave(ref); });
}

absl::Status JobRegistry::Preempted(const NodeRef& ref, absl::Time leaves_at,
                                    const std::string& reason) {
  return Run(ref.job_id, [&](Job& job) { return job.Preempted(ref, leaves_at, reason); });
}

absl::Status JobRegistry::ReadyToLeave(const NodeRef& ref) {
  return Run(ref.job_id, [&](Job& job) { return job.ReadyToLeave(ref); });
}

void JobRegistry::Tick() {
  ChangeScope locked(this);
  const absl::Time now = clock_.Now();
  const absl::Duration gap = now - last_tick_;
  const bool stalled = options_.stall_threshold > absl::ZeroDuration() &&
                       last_tick_ != absl::InfinitePast() && gap > options_.stall_threshold;
  last_tick_ = now;
  if (stalled) {
    DDP_LOG(WARNING) << "the coordinator did not run its timers for " << absl::FormatDuration(gap)
                     << " (paused, frozen, or blocked): no node's silence meanwhile counts; "
                     << "every node has a full heartbeat timeout from now";
  }
  const int64_t dropped =
      options_.take_dropped_heartbeats ? options_.take_dropped_heartbeats() : 0;
  if (dropped > 0) {
    DDP_LOG_EVERY_N_SEC(WARNING, 10)
        << "the coordinator dropped " << dropped
        << " heartbeat datagrams unread since its last tick (its UDP receive queue was full: "
           "it is overloaded): no node's silence until now counts; every node has a full "
           "heartbeat timeout from now";
  }
  for (auto& [id, job] : jobs_) {
    if (stalled || dropped > 0) job->ServingResumed(stalled ? gap : absl::ZeroDuration());
    job->Tick();
    AfterChangeLocked(*job);
  }
}

Outbox JobRegistry::TakeOutbox() {
  absl::MutexLock lock(&mu_);
  if (store_ != nullptr) {
    for (const JobEvent& event : outbox_.events) {
      int64_t& taken = taken_event_index_[event.job_id()];
      taken = std::max(taken, event.index());
    }
  }
  Outbox out = std::move(outbox_);
  outbox_.messages.clear();
  outbox_.events.clear();
  return out;
}

WriteBehindQueue::Batch JobRegistry::TakeCommitBatch() {
  absl::MutexLock lock(&mu_);
  if (write_queue_.in_flight()) return {};
  return write_queue_.TakeBatch();
}

std::vector<std::function<void()>> JobRegistry::BatchDone(const absl::Status& status,
                                                          WriteBehindQueue::Batch batch) {
  if (batch.number == 0) return {};
  // No signals: the caller takes the released outbox next (TakeOutbox) and
  // tries a failed batch again itself; waking the loop would cost an empty pass.
  absl::MutexLock lock(&mu_);
  if (status.ok()) return write_queue_.Committed(outbox_);
  write_queue_.Failed(std::move(batch));
  return {};
}

absl::Status JobRegistry::PersistPending() {
  absl::MutexLock persist_lock(&persist_mu_);
  WriteBehindQueue::Batch batch = TakeCommitBatch();
  if (batch.number == 0) return absl::OkStatus();
  absl::Status status = store_->ApplyBatch(batch.changes);
  for (std::function<void()>& fn : BatchDone(status, std::move(batch))) fn();
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("job changes are not durable yet (storage: ", status.message(),
                     "); they stay queued and are retried"));
  }
  return absl::OkStatus();
}

bool JobRegistry::HasPendingWrites() const {
  absl::MutexLock lock(&mu_);
  return write_queue_.has_pending();
}

uint64_t JobRegistry::DurabilityMark() const {
  absl::MutexLock lock(&mu_);
  return write_queue_.Mark();
}

void JobRegistry::WhenDurable(uint64_t mark, std::function<void()> fn) {
  {
    absl::MutexLock lock(&mu_);
    if (write_queue_.WhenDurable(mark, fn)) return;
  }
  fn();
}

absl::Status JobRegistry::AwaitDurable(uint64_t mark, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto durable = [this, mark]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return write_queue_.committed() >= mark;
  };
  if (mu_.AwaitWithTimeout(absl::Condition(&durable), timeout)) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      absl::StrCat("the change was made but is not durable after ", absl::FormatDuration(timeout),
                   " (the job database is not accepting writes); it stays queued and is "
                   "retried: check the coordinator's log and disk"));
}

}  // namespace ddp::rendezvous
