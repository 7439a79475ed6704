// Job orchestrates one job's rendezvous and lifecycle: each input is checked
// against Membership (who may act), RendezvousRound (which generation, what
// it awaits) and the job's state, and a disturbance of the running
// generation goes to RestartPolicy, whose decision Job applies (Apply).

#include "coordinator/rendezvous/job.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/rendezvous/member_listing.h"
#include "coordinator/rendezvous/rank_table.h"
#include "coordinator/rendezvous/stragglers.h"

namespace ddp::rendezvous {
namespace {

// The record's parts its objects keep are taken out of record_ (MakeRecord
// writes them back in).
JobRecord OwnPartOf(JobRecord record) {
  record.clear_generation();
  record.clear_restart_count();
  record.clear_cause();
  record.clear_failure_history();
  record.clear_excluded_nodes();
  record.clear_master();
  record.clear_world_size();
  SetCounters(JobCounters{}, &record);
  return record;
}

}  // namespace

Job::Job(const JobRecord& r, const RendezvousLimits& limits, const Clock& clock, Outbox* outbox)
    : record_(OwnPartOf(r)),
      limits_(limits),
      clock_(&clock),
      outbox_(outbox),
      restart_policy_(
          RestartPolicy::Options{r.settings().max_restarts(), limits.max_retained_failures,
                                 limits.max_message_length, limits.max_failures_with_logs},
          r.restart_count(), RootCauseOf(r),
          std::vector<FailureInfo>(r.failure_history().begin(), r.failure_history().end())),
      membership_(r.job_id(), Membership::OptionsFor(r.settings(), limits), clock,
                  std::vector<std::string>(r.excluded_nodes().begin(), r.excluded_nodes().end()),
                  r.next_join_seq()),
      round_(r.generation(), r.master()),
      last_event_index_(r.last_event_index()) {}

Job::Job(std::string job_id, const JobSettings& settings, const RendezvousLimits& limits,
         const Clock& clock, Outbox* outbox)
    : Job(NewJobRecord(std::move(job_id), settings, clock.Now()), limits, clock, outbox) {
  Emit(JobEvent::JOB_CREATED, "",
       absl::StrCat("job created: nodes ", settings.min_nodes(), ":", settings.max_nodes(),
                    ", max_restarts ", settings.max_restarts()));
  OpenRendezvous(/*after_restart=*/false);
}

absl::StatusOr<std::unique_ptr<Job>> Job::Restore(const JobSnapshot& snapshot,
                                                  const RendezvousLimits& limits,
                                                  const Clock& clock, Outbox* outbox) {
  const JobRecord& r = snapshot.job;
  absl::Status status = ValidateJobSettings(r.settings(), limits);
  if (!status.ok()) {
    return absl::DataLossError(
        absl::StrCat("stored job '", Capped(r.job_id()), "': ", status.message()));
  }
  std::unique_ptr<Job> job(new Job(r, limits, clock, outbox));
  DDP_RETURN_IF_ERROR(job->RestoreEvents(snapshot.events));
  const absl::Time now = clock.Now();
  // Every state but WAITING has a generation's members; a job that finished
  // with one formed (a world size stored) keeps them to show (issue 25.5).
  const bool has_members =
      job->state() != JobState::kWaiting && (!IsTerminal(job->state()) || r.world_size() > 0);
  DDP_RETURN_IF_ERROR(job->membership_.Restore(snapshot.nodes, limits));
  if (has_members) {
    std::vector<std::pair<std::string, int>> ranks;
    for (const auto& [id, node] : job->membership_.nodes()) {
      ranks.emplace_back(id, node.record.group_rank());
    }
    DDP_RETURN_IF_ERROR(job->round_.RestoreMembers(ranks, r.world_size(), r.job_id()));
  }
  if (!IsTerminal(job->state())) {
    for (const auto& [id, node] : job->membership_.nodes()) {
      if (std::optional<absl::Time> leaves_at = DrainLeavesAt(node.record)) {
        job->draining_[id] = Drain{*leaves_at, node.record.drain_reason()};
      }
    }
  }
  switch (job->state()) {
    case JobState::kWaiting:
      job->OpenRendezvous(/*after_restart=*/false);
      break;
    case JobState::kStarting:
      job->round_.AwaitMasterUntil(now + ShutdownTimeout(r.settings()));
      break;
    case JobState::kRestarting:
      // Confirmations were not stored: ask again on resume.
      job->stop_barrier_.Open(job->round_.members().by_rank, now + ShutdownTimeout(r.settings()));
      // A member removed before the coordinator stopped (its ranks are
      // missing from the stored members) may still run workers until its
      // lease runs out; its last heartbeat was before now.
      if (job->MemberProcesses() < job->round_.members().world_size) {
        job->stop_barrier_.FenceUntil(now + HeartbeatTimeout(r.settings()));
      }
      break;
    default:
      break;
  }
  job->job_dirty_ = false;
  job->counters_dirty_ = false;
  job->membership_.ForgetChanges();
  return job;
}

absl::Status Job::RestoreEvents(const std::vector<JobEvent>& stored) {
  int64_t previous = 0;
  for (const JobEvent& event : stored) {
    if (event.index() <= previous || event.index() > last_event_index_ || event.job_id() != id()) {
      return absl::DataLossError(absl::StrCat("stored event ", event.index(), " of job '",
                                              Capped(id()), "' is inconsistent (after event ",
                                              previous, ", last event ", last_event_index_,
                                              ", of job '", Capped(event.job_id()), "')"));
    }
    previous = event.index();
  }
  // A lower retention than the stored events had keeps the newest.
  const size_t keep = static_cast<size_t>(std::max(0, limits_.max_retained_events));
  const size_t skip = stored.size() > keep ? stored.size() - keep : 0;
  events_.assign(stored.begin() + static_cast<std::ptrdiff_t>(skip), stored.end());
  events_dropped_ = skip > 0;
  for (const JobEvent& event : stored) time_ledger_.Add(event);
  // Every stored event is durable; those after them were lost with the batch
  // that carried them, which no one was told of.
  events_taken_index_ = last_event_index_;
  return absl::OkStatus();
}

int64_t Job::MemberProcesses() const {
  int64_t processes = 0;
  for (const std::string& id : round_.members().by_rank) {
    if (!id.empty()) processes += membership_.nodes().at(id).record.nproc();
  }
  return processes;
}

// The API's job deliberately differs from the stored record: its state is
// jobs.proto's enum, its times milliseconds, and it carries no counters but
// the last event index, no master info and no token hash.
v1::Job ApiJobOf(const JobRecord& r) {
  v1::Job s;
  s.set_job_id(r.job_id());
  *s.mutable_settings() = r.settings();
  s.set_state(JobStateToProto(JobStateOf(r)));
  s.set_generation(r.generation());
  s.set_restart_count(r.restart_count());
  s.set_world_size(r.world_size());
  if (r.has_cause()) *s.mutable_root_cause() = r.cause();
  s.set_message(r.finish_message());
  *s.mutable_failures() = r.failure_history();
  *s.mutable_excluded_nodes() = r.excluded_nodes();
  s.set_last_event_index(r.last_event_index());
  if (r.created_unix_ns() != 0) s.set_created_unix_ms(absl::ToUnixMillis(CreatedAt(r)));
  s.set_run(r.run());
  if (r.finished_unix_ns() != 0) s.set_finished_unix_ms(absl::ToUnixMillis(FinishedAt(r)));
  return s;
}

bool Job::IsMember(const Node& node) const {
  int rank = node.record.group_rank();
  return (state() == JobState::kStarting || state() == JobState::kRunning ||
          state() == JobState::kRestarting) &&
         round_.members().Holds(rank, node.record.node_id());
}

void Job::Emit(JobEventType type, const std::string& node_id, const std::string& message,
               std::optional<FailureInfo> failure) {
  Publish(NewEvent(type, node_id, message, std::move(failure)));
}

JobEvent Job::NewEvent(JobEventType type, const std::string& node_id, const std::string& message,
                       std::optional<FailureInfo> failure) const {
  JobEvent event;
  event.set_job_id(id());
  SetEventTime(clock_->Now(), &event);
  event.set_type(type);
  event.set_node_id(node_id);
  event.set_generation(round_.generation());
  event.set_message(message);
  if (failure.has_value()) {
    *event.mutable_failure() = *std::move(failure);
    // Events are many (max_retained_events) and streamed to every watcher:
    // the worker's output stays with the job's failures.
    event.mutable_failure()->clear_stderr_tail();
    event.mutable_failure()->clear_traceback();
  }
  return event;
}

void Job::Publish(JobEvent event) {
  event.set_index(++last_event_index_);
  time_ledger_.Add(event);
  events_.push_back(event);
  while (static_cast<int>(events_.size()) > limits_.max_retained_events) {
    events_.pop_front();
    events_dropped_ = true;
  }
  outbox_->events.push_back(std::move(event));
  counters_dirty_ = true;  // last_event_index must survive a restart
}

void Job::Send(const Node& node, MessageBody body) {
  OutboundMessage message;
  message.job_id = id();
  message.node_id = node.record.node_id();
  message.incarnation = node.record.incarnation();
  message.body = std::move(body);
  outbox_->messages.push_back(std::move(message));
}

JobRecord Job::MakeRecord() const {
  JobRecord r = record_;  // the job's own part; its objects' parts follow
  r.set_generation(round_.generation());
  r.set_restart_count(restart_policy_.restart_count());
  if (restart_policy_.root_cause()) *r.mutable_cause() = *restart_policy_.root_cause();
  r.mutable_failure_history()->Assign(restart_policy_.failures().begin(),
                                      restart_policy_.failures().end());
  for (std::string& node : membership_.ExcludedSorted()) r.add_excluded_nodes(std::move(node));
  *r.mutable_master() = round_.master();
  r.set_world_size(round_.members().world_size);
  SetCounters(JobCounters{last_event_index_, membership_.next_join_seq()}, &r);
  return r;
}

JobChanges Job::TakeChanges() {
  JobChanges changes;
  changes.job_id = id();
  if (job_dirty_) changes.job = MakeRecord();
  if (counters_dirty_ || job_dirty_) {
    changes.counters = JobCounters{last_event_index_, membership_.next_join_seq()};
  }
  membership_.TakeChanges(changes);
  // The events emitted since the last call (read from events_, so that what
  // was set on an event after Emit, its restart cause, is stored too).
  auto first_new =
      std::upper_bound(events_.begin(), events_.end(), events_taken_index_,
                       [](int64_t index, const JobEvent& event) { return index < event.index(); });
  changes.appended_events.assign(first_new, events_.end());
  events_taken_index_ = last_event_index_;  // any others left events_ before they were taken
  if (events_dropped_) {
    changes.drop_events_before = events_.empty() ? last_event_index_ + 1 : events_.front().index();
    events_dropped_ = false;
  }
  job_dirty_ = false;
  counters_dirty_ = false;
  return changes;
}

v1::Job Job::Status(bool include_nodes) const {
  v1::Job s = ApiJobOf(MakeRecord());
  s.set_registered_nodes(membership_.size());
  s.set_member_count(round_.members().live);
  s.set_first_event_index(events_.empty() ? 0 : events_.front().index());
  if (!include_nodes) return s;
  const absl::Time now = clock_->Now();
  std::vector<const Node*> nodes;
  for (const auto& [id, node] : membership_.nodes()) nodes.push_back(&node);
  std::sort(nodes.begin(), nodes.end(),
            [](const Node* a, const Node* b) { return a->record.node_id() < b->record.node_id(); });
  // The members' reports, and the CPU of their ranks that make none, are
  // scored against each other (stragglers.h).
  std::vector<std::vector<WorkerProgress>> progress(nodes.size());
  std::vector<WorkerProgress*> reports;
  for (size_t i = 0; i < nodes.size(); ++i) {
    progress[i] = nodes[i]->progress;
    if (!IsMember(*nodes[i])) continue;
    if (state() == JobState::kRunning) {
      AddCpuBusyRanks(nodes[i]->idleness.workers(), round_.generation(), nodes[i]->last_heartbeat,
                      &progress[i]);
    }
    for (WorkerProgress& p : progress[i]) reports.push_back(&p);
  }
  ScoreStragglers(reports, round_.generation());
  std::vector<v1::Member> listed;
  listed.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = *nodes[i];
    v1::Member& m = listed.emplace_back();
    m.set_node_id(node.record.node_id());
    m.set_incarnation(node.record.incarnation());
    m.set_address(node.record.address());
    m.set_nproc(node.record.nproc());
    m.set_group_rank(IsMember(node) ? node.record.group_rank() : -1);
    m.set_heartbeat_age_ms(node.last_heartbeat == absl::Time()
                               ? -1
                               : absl::ToInt64Milliseconds(now - node.last_heartbeat));
    m.set_connected(node.connected);
    for (const WorkerProgress& p : progress[i]) *m.add_progress() = ProgressToApi(p, now);
    if (auto drain = draining_.find(node.record.node_id()); drain != draining_.end()) {
      m.set_leaves_at_unix_ms(absl::ToUnixMillis(drain->second.leaves_at));
      m.set_drain_reason(drain->second.reason);
    }
  }
  ListMembers(IsTerminal(state()), std::move(listed), &s);
  *s.mutable_time() = time_ledger_.ToProto(now);
  return s;
}

absl::StatusOr<std::vector<JobEvent>> Job::EventsSince(int64_t after_index, int limit) const {
  std::vector<JobEvent> out;
  if (events_.empty()) return out;
  int64_t first = events_.front().index();
  if (after_index + 1 < first) {
    return absl::OutOfRangeError(absl::StrCat("events after index ", after_index, " of job '", id(),
                                              "' were dropped; the oldest retained is ", first,
                                              "; read the job status and watch from there"));
  }
  size_t start = after_index < first ? 0 : static_cast<size_t>(after_index + 1 - first);
  for (size_t i = start; i < events_.size() && static_cast<int>(out.size()) < limit; ++i) {
    out.push_back(events_[i]);
  }
  return out;
}

// ---- Agent inputs: registration, resume, incarnation replacement, heartbeats,
// stream closes, leaves and node removal ----

absl::StatusOr<RegisterResult> Job::Register(const RegisterRequest& request) {
  absl::Status status = membership_.ValidateRegistration(request, settings().max_nodes(), limits_);
  if (!status.ok()) return status;
  if (request.settings) {
    status = CheckCompatibleSettings(id(), settings(), request.node_id, *request.settings);
    if (!status.ok()) {
      NoticeConflict(status);
      return status;
    }
  }
  const int nproc = request.nproc > 0 ? request.nproc : settings().nproc_per_node();
  Node* node = membership_.Find(request.node_id);
  if (node != nullptr && node->record.incarnation() == request.incarnation) {
    if (node->record.nproc() != nproc || node->record.requested_rank() != request.requested_rank) {
      return absl::FailedPreconditionError(
          absl::StrCat("node '", request.node_id, "' resumed incarnation ", request.incarnation,
                       " with nproc=", nproc, " rank request ", request.requested_rank,
                       " but registered with nproc=", node->record.nproc(), " rank request ",
                       node->record.requested_rank(),
                       "; an agent that changes its flags must use a new incarnation"));
    }
    return Resume(*node, request);
  }
  if (IsTerminal(state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", id(), "' already finished (", JobStateName(state()), "); use a new job id"));
  }
  if (node != nullptr && membership_.Alive(*node)) {
    // The registered agent is alive (its stream is open and it heartbeats):
    // this is a second agent with the same node id, not a restart. Replacing
    // the live one would make the two fence each other forever.
    return absl::AlreadyExistsError(absl::StrCat(
        "node id '", request.node_id, "' of job '", id(),
        "' is already used by a live agent (incarnation ", node->record.incarnation(), " at ",
        node->record.address(),
        ", heartbeating); two agents cannot share a node id (the default is the hostname: "
        "two agents on one host, or containers sharing a hostname): give each its own "
        "--node-id"));
  }
  if (node != nullptr) {
    ReplaceIncarnation(*node, request);
  } else {
    int limit = settings().max_nodes() + limits_.max_spare_nodes;
    if (membership_.size() >= limit) {
      return absl::ResourceExhaustedError(
          absl::StrCat("job '", id(), "' already has ", membership_.size(),
                       " registered nodes, the limit (max_nodes + spares) is ", limit, "; node '",
                       request.node_id, "' cannot join"));
    }
    AddNode(request, nproc);
  }
  node = membership_.Find(request.node_id);
  RegisterResult result;
  result.settings = settings();
  result.state = state();
  result.generation = round_.generation();
  result.role = node != nullptr && IsMember(*node) ? NodeRole::kMember : NodeRole::kWaiting;
  return result;
}

void Job::NoticeConflict(const absl::Status& refusal) {
  // The refused agent exits with the error; the nodes already here would
  // otherwise wait silently until the join timeout. At most one notice per
  // heartbeat interval (a launcher retrying in a loop must not flood them).
  const absl::Time now = clock_->Now();
  if (now < next_conflict_notice_) return;
  next_conflict_notice_ = now + HeartbeatInterval(settings());
  for (const auto& [id, node] : membership_.nodes()) {
    Send(node, Notice{absl::StrCat("a node was refused: ", refusal.message())});
  }
}

absl::StatusOr<RegisterResult> Job::Resume(Node& node, const RegisterRequest& request) {
  membership_.Resume(node, request);
  if (request.lease_expired) HandleLeaseExpired(node, request);
  ResendPending(node);
  RegisterResult result;
  result.settings = settings();
  result.state = state();
  result.generation = round_.generation();
  result.role = IsMember(node) ? NodeRole::kMember : NodeRole::kWaiting;
  result.resumed = true;
  return result;
}

void Job::HandleLeaseExpired(Node& node, const RegisterRequest& request) {
  if (!IsMember(node) || request.generation != round_.generation() || node.succeeded) return;
  const std::string& node_id = node.record.node_id();
  if (state() == JobState::kRunning) {
    Decide(Disruption::MembershipChange(
        RestartCause::NODE_LOSS,
        absl::StrCat("node '", node_id, "' was cut off from the coordinator for longer ",
                     "than its lease (", absl::FormatDuration(LeaseFor(settings()).lease),
                     ") and stopped its workers of generation ", round_.generation(),
                     "; a membership change: the restart budget is not charged")));
  } else if (state() == JobState::kRestarting && stop_barrier_.Confirm(node_id)) {
    MaybeFinishStopBarrier();  // its workers are stopped: as WorkersStopped
  }
}

void Job::ResendPending(const Node& node) {
  const bool member = IsMember(node);
  if (IsTerminal(state())) {
    Send(node, JobFinished{state(), restart_policy_.root_cause(), record_.finish_message()});
  } else if (state() == JobState::kStarting && member && node.record.group_rank() == 0) {
    Send(node, RequestMasterInfo{round_.generation()});
  } else if (state() == JobState::kRunning && member) {
    Send(node, round_.AssignmentFor(node.record, restart_policy_.restart_count(),
                                    restart_policy_.max_restarts()));
  } else if (state() == JobState::kRestarting && stop_barrier_.Awaits(node.record.node_id())) {
    Send(node, StopWorkers{round_.generation(), "resent after the session resumed"});
  }
}

void Job::AddNode(const RegisterRequest& request, int nproc) {
  membership_.Add(request, nproc);
  counters_dirty_ = true;  // next_join_seq
  Emit(JobEvent::NODE_JOINED, request.node_id,
       absl::StrCat("nproc ", nproc, ", incarnation ", request.incarnation));
  switch (state()) {
    case JobState::kWaiting:
      MaybeCloseRendezvous();
      break;
    case JobState::kStarting:
      // No worker started yet: reform at once with the newcomer.
      if (round_.members().live < settings().max_nodes()) OpenRendezvous(true);
      break;
    case JobState::kRunning:
      if (round_.members().live < settings().max_nodes()) {
        Decide(Disruption::MembershipChange(
            RestartCause::SCALE,
            absl::StrCat("node '", request.node_id, "' joined below max_nodes")));
      }
      break;
    default:  // kRestarting: it is a candidate of the next rendezvous.
      break;
  }
}

void Job::ReplaceIncarnation(Node& node, const RegisterRequest& request) {
  const Incarnation old_incarnation = node.record.incarnation();
  const bool member = IsMember(node);
  // The old agent's stream had closed: it died (or was cut off) and this is
  // its replacement, a membership change rather than a worker failure.
  const bool old_session_lost = node.stream_closed_at.has_value();
  // The old agent may be alive but cut off, its workers running until its
  // lease runs out.
  FenceWorkersOf(node);
  const int nproc = request.nproc > 0 ? request.nproc : settings().nproc_per_node();
  const bool nproc_changed = node.record.nproc() != nproc;
  membership_.Replace(node, request, nproc);
  const std::string node_id = node.record.node_id();
  Emit(JobEvent::NODE_JOINED, node_id,
       absl::StrCat("incarnation ", request.incarnation, " replaced ", old_incarnation,
                    " (agent restarted); the old one is "
                    "fenced"));
  if (!member) return;
  switch (state()) {
    case JobState::kStarting:
      if (nproc_changed) {
        OpenRendezvous(true);
      } else if (node.record.group_rank() == 0) {
        Send(node, RequestMasterInfo{round_.generation()});
      }
      break;
    case JobState::kRunning:
      if (!node.succeeded) {
        Decide(Disruption::AgentReplaced(node_id, old_incarnation, request.incarnation,
                                         old_session_lost));
      }
      break;
    case JobState::kRestarting:
      if (stop_barrier_.Awaits(node.record.node_id())) {
        Send(node, StopWorkers{round_.generation(), "agent restarted during a stop"});
      }
      break;
    default:
      break;
  }
}

absl::StatusOr<Generation> Job::Heartbeat(const NodeRef& ref) {
  DDP_ASSIGN_OR_RETURN(Node * node,
                       membership_.Fence(ref, round_.generation(), /*exact_generation=*/false));
  membership_.Heartbeat(*node);
  return state() == JobState::kRunning && IsMember(*node) ? round_.generation() : 0;
}

absl::Status Job::ReportProgress(const NodeRef& ref, std::vector<WorkerProgress> progress) {
  DDP_ASSIGN_OR_RETURN(Node * node,
                       membership_.Fence(ref, round_.generation(), /*exact_generation=*/false));
  const bool running_generation =
      ref.generation == round_.generation() &&
      (state() == JobState::kRunning || state() == JobState::kRestarting);
  for (WorkerProgress& p : progress) {
    p.generation = ref.generation;
    if (!running_generation || !p.checkpoint) continue;
    const absl::Time written = std::min(*p.checkpoint, clock_->Now());
    if (!generation_checkpoint_ || written > *generation_checkpoint_) {
      generation_checkpoint_ = written;
      generation_checkpoint_step_ = p.checkpoint_step;
    }
  }
  std::sort(progress.begin(), progress.end(), [](const WorkerProgress& a, const WorkerProgress& b) {
    return a.local_rank < b.local_rank;
  });
  node->progress = std::move(progress);
  return absl::OkStatus();
}

absl::Status Job::ReportActivity(const NodeRef& ref, std::vector<WorkerActivity> workers) {
  DDP_ASSIGN_OR_RETURN(Node * node,
                       membership_.Fence(ref, round_.generation(), /*exact_generation=*/false));
  for (const WorkerActivity& w : workers) {
    if (w.local_rank < 0 || w.local_rank >= node->record.nproc()) {
      return absl::InvalidArgumentError(absl::StrCat("activity of local rank ", w.local_rank,
                                                     " of node '", ref.node_id, "', outside [0, ",
                                                     node->record.nproc(), ")"));
    }
  }
  if (state() != JobState::kRunning || ref.generation != round_.generation() || !IsMember(*node)) {
    return absl::OkStatus();  // workers of no running generation: nothing to judge
  }
  node->idleness.Update(std::move(workers));
  return absl::OkStatus();
}

absl::Status Job::StreamClosed(const NodeRef& ref) {
  DDP_ASSIGN_OR_RETURN(Node * node,
                       membership_.Fence(ref, round_.generation(), /*exact_generation=*/false));
  membership_.StreamClosed(*node);
  return absl::OkStatus();
}

absl::Status Job::Leave(const NodeRef& ref) {
  DDP_RETURN_IF_ERROR(
      membership_.Fence(ref, round_.generation(), /*exact_generation=*/false).status());
  RemoveNode(ref.node_id, "left the job", RestartCause::NODE_LOSS, /*workers_stopped=*/true);
  // Every agent that came left (Ctrl-C) before the first generation: nothing
  // ran and nobody waits, so the job ends and a rerun of its id, with its own
  // settings, starts a new run at once instead of waiting out the join timeout
  // for nodes of the old settings. A job nobody joined yet (CreateJob) is not
  // affected.
  if (state() == JobState::kWaiting && round_.generation() == 0 && membership_.size() == 0) {
    Finish(JobState::kCancelled, std::nullopt,
           "abandoned: every agent left before the first generation");
  }
  return absl::OkStatus();
}

void Job::FenceWorkersOf(const Node& node) {
  const bool may_run =
      IsMember(node) && !node.succeeded &&
      (state() == JobState::kRunning ||
       (state() == JobState::kRestarting && stop_barrier_.Awaits(node.record.node_id())));
  if (!may_run) return;
  stop_barrier_.FenceUntil(node.last_heartbeat + HeartbeatTimeout(settings()));
}

void Job::RemoveNode(std::string node_id, const std::string& reason, RestartCause cause,
                     bool workers_stopped, FailureInfo::NodeLoss loss) {
  const Node* node = membership_.Find(node_id);
  if (node == nullptr) return;
  if (!workers_stopped) FenceWorkersOf(*node);
  const bool member = IsMember(*node);
  const bool stop_pending = stop_barrier_.Confirm(node_id);  // it is gone either way
  const bool succeeded = node->succeeded;
  if (member) {
    round_.mutable_members().Remove(node->record.group_rank());
  }
  membership_.Remove(node_id);
  draining_.erase(node_id);
  std::optional<FailureInfo> lost;
  if (loss != FailureInfo::NODE_LOSS_UNSPECIFIED) {
    lost = NodeFailure(node_id, round_.generation(), clock_->Now(), reason);
    lost->set_node_loss(loss);
  }
  Emit(JobEvent::NODE_LOST, node_id, reason, std::move(lost));
  switch (state()) {
    case JobState::kWaiting:
      if (membership_.size() < settings().min_nodes()) {
        round_.MinNoLongerReached();
      }
      break;
    case JobState::kStarting:
      if (member) OpenRendezvous(true);
      break;
    case JobState::kRunning:
      if (member && !succeeded) {
        Decide(Disruption::MembershipChange(cause, absl::StrCat("node '", node_id, "' ", reason)));
      }
      break;
    case JobState::kRestarting:
      if (stop_pending) MaybeFinishStopBarrier();
      break;
    default:
      break;
  }
}

// ---- The generation: rendezvous rounds, master info and assignments, worker
// exits, restart decisions applied, the stop barrier and the end of the job ----

void Job::OpenRendezvous(bool after_restart) {
  const absl::Time now = clock_->Now();
  SetJobState(JobState::kWaiting, &record_);
  round_.Open(now + JoinTimeout(settings()));
  stop_barrier_.Close();
  MarkJobDirty();
  // After a restart that kept min_nodes, the new generation forms at once (no
  // last call): the nodes are all there and waiting would only delay training.
  if (after_restart && membership_.size() >= settings().min_nodes()) {
    CloseRendezvous();
    return;
  }
  MaybeCloseRendezvous();
}

void Job::MaybeCloseRendezvous() {
  if (state() != JobState::kWaiting) return;
  if (round_.ReadyToClose(membership_.size(), settings(), clock_->Now())) CloseRendezvous();
}

void Job::CloseRendezvous() {
  std::vector<Node*> candidates = membership_.CandidatesInOrder();
  const size_t n = std::min(candidates.size(), static_cast<size_t>(settings().max_nodes()));
  std::vector<RankMember> rank_members(n);
  for (size_t i = 0; i < n; ++i) {
    const NodeRecord& r = candidates[i]->record;
    rank_members[i] = RankMember{r.node_id(), r.nproc(), r.requested_rank(), r.group_rank()};
  }
  absl::StatusOr<RankTable> table =
      round_.Close(rank_members, clock_->Now() + ShutdownTimeout(settings()));
  if (!table.ok()) {  // Inputs are validated on entry; this is a bug.
    FailureInfo failure = NodeFailure(
        "", round_.generation(), clock_->Now(),
        absl::StrCat("internal error computing the rank table: ", table.status().message()));
    Finish(JobState::kFailed, failure, failure.message());
    return;
  }
  for (const std::string& node_id : table->ignored_requests) {
    DDP_LOG(WARNING) << "job " << id() << ": rank request of node " << node_id
                     << " is out of range or contested; ignored";
  }
  for (const RankEntry& e : table->entries) {
    Node& node = *membership_.Find(e.node_id);
    if (node.record.group_rank() != e.group_rank ||
        node.record.global_rank_offset() != e.global_rank_offset) {
      node.record.set_group_rank(e.group_rank);
      node.record.set_global_rank_offset(e.global_rank_offset);
      membership_.MarkDirty(e.node_id);
    }
  }
  for (size_t i = n; i < candidates.size(); ++i) {  // hot spares
    Node* spare = candidates[i];
    if (spare->record.group_rank() != -1) {
      spare->record.set_group_rank(-1);
      membership_.MarkDirty(spare->record.node_id());
    }
  }
  membership_.ForgetGenerationProgress();
  SetJobState(JobState::kStarting, &record_);
  MarkJobDirty();
  Send(*membership_.Find(round_.members().by_rank[0]), RequestMasterInfo{round_.generation()});
}

absl::Status Job::ReportMasterInfo(const NodeRef& ref, const MasterInfo& info) {
  DDP_ASSIGN_OR_RETURN(Node * node,
                       membership_.Fence(ref, round_.generation(), /*exact_generation=*/true));
  if (!IsMember(*node) || node->record.group_rank() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node '", ref.node_id, "' is not group rank 0 of generation ", round_.generation(),
        " of job '", id(), "'; only rank 0 supplies master info"));
  }
  DDP_ASSIGN_OR_RETURN(MasterInfo effective,
                       RendezvousRound::EffectiveMasterInfo(
                           info, ref.node_id, node->record.address(), limits_.max_address_length));
  if (state() == JobState::kRunning) return absl::OkStatus();  // duplicate
  if (state() != JobState::kStarting) {
    return absl::FailedPreconditionError(absl::StrCat("job '", id(), "' is ", JobStateName(state()),
                                                      ", not waiting for master info"));
  }
  PushAssignments(std::move(effective));
  return absl::OkStatus();
}

void Job::PushAssignments(MasterInfo master) {
  std::vector<MemberRole> roles;
  for (const std::string& node_id : round_.members().by_rank) {
    if (node_id.empty()) continue;
    const Node& node = *membership_.Find(node_id);
    roles.push_back(MemberRole{node_id, node.role, node.record.nproc()});
  }
  round_.Start(std::move(master), roles);
  SetJobState(JobState::kRunning, &record_);
  running_since_ = clock_->Now();
  generation_checkpoint_.reset();
  generation_checkpoint_step_ = 0;
  MarkJobDirty();
  for (const std::string& node_id : round_.members().by_rank) {
    if (!node_id.empty()) ResendPending(*membership_.Find(node_id));
  }
  Emit(JobEvent::GENERATION_OPENED, round_.members().by_rank[0],
       absl::StrCat("generation ", round_.generation(), ": ", round_.members().live,
                    " nodes, world size ", round_.members().world_size, ", restart ",
                    restart_policy_.restart_count(), " of ", restart_policy_.max_restarts()));
}

absl::Status Job::WorkerExited(const NodeRef& ref, const WorkerExit& exit) {
  DDP_ASSIGN_OR_RETURN(Node * node,
                       membership_.Fence(ref, round_.generation(), /*exact_generation=*/true));
  if (exit.local_rank() < 0 || exit.local_rank() >= node->record.nproc()) {
    return absl::InvalidArgumentError(absl::StrCat("local rank ", exit.local_rank(), " of node '",
                                                   ref.node_id, "' is outside [0, ",
                                                   node->record.nproc(), ")"));
  }
  if (IsTerminal(state())) return absl::OkStatus();
  if (round_.generation() == 0 || state() == JobState::kStarting ||
      (state() == JobState::kRunning && !IsMember(*node))) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", ref.node_id, "' runs no workers of generation ", round_.generation(),
                     " of job '", id(), "' (", JobStateName(state()), ")"));
  }
  // One report per worker and generation counts: a resumed agent repeats its
  // reports, and a hung worker that exits later was already reported.
  if (node->exited.empty()) node->exited.assign(node->record.nproc(), false);
  if (node->exited[exit.local_rank()]) return absl::OkStatus();
  if (ExitedCleanly(exit)) {
    if (state() != JobState::kRunning) return absl::OkStatus();
    node->exited[exit.local_rank()] = true;
    if (++node->exited_ok == node->record.nproc() && !node->succeeded) {
      node->succeeded = true;
      if (++round_.mutable_members().succeeded ==
          static_cast<int>(round_.members().by_rank.size())) {
        Finish(JobState::kSucceeded, std::nullopt,
               absl::StrCat("every worker of generation ", round_.generation(), " exited 0"));
      }
    }
    return absl::OkStatus();
  }
  node->exited[exit.local_rank()] = true;
  // The agent's report is the failure; the core fills in where it happened
  // and cuts what the agent sent to the job's limits.
  FailureInfo failure = exit;
  failure.set_node_id(ref.node_id);
  failure.set_generation(round_.generation());
  failure.set_global_rank(node->record.global_rank_offset() + exit.local_rank());
  failure.set_process_stopped(exit.hang() && exit.process_stopped());
  failure.set_message(Utf8Prefix(exit.message(), limits_.max_message_length));
  failure.set_stderr_tail(Utf8Suffix(exit.stderr_tail(), limits_.max_stderr_tail_bytes));
  failure.set_traceback(Utf8Suffix(exit.traceback(), limits_.max_traceback_bytes));
  failure.set_log_path(Utf8Prefix(exit.log_path(), limits_.max_log_path_length));
  // An agent that sent no time: the moment the report arrived.
  if (exit.time_unix_ms() == 0) SetFailureTime(clock_->Now(), &failure);
  Decide(Disruption::WorkerFailure(std::move(failure)),
         state() == JobState::kRunning ? LostPeerOf(ref.node_id) : std::nullopt);
  return absl::OkStatus();
}

std::optional<LostPeer> Job::LostPeerOf(const std::string& reporter) const {
  const absl::Time now = clock_->Now();
  std::optional<LostPeer> lost;
  for (const std::string& node_id : round_.members().by_rank) {
    if (node_id.empty() || node_id == reporter) continue;
    const Node* node = membership_.Find(node_id);
    if (node == nullptr || node->succeeded) continue;
    const std::optional<absl::Time> since = membership_.LostSince(*node, now);
    if (since.has_value() && (!lost.has_value() || *since < lost->since)) {
      lost =
          LostPeer{node_id, *since, node->stream_closed_at.has_value(), now - node->last_heartbeat};
    }
  }
  return lost;
}

void Job::Decide(const Disruption& disruption, std::optional<LostPeer> lost_peer) {
  RestartContext context;
  context.state = state();
  context.generation = round_.generation();
  context.now = clock_->Now();
  context.running_since = running_since_;
  context.lost_peer = std::move(lost_peer);
  Apply(restart_policy_.Decide(disruption, context));
}

void Job::Apply(const RestartDecision& decision) {
  for (const FailureInfo& failure : decision.recorded) {
    MarkJobDirty();
    Emit(JobEvent::WORKER_FAILED, failure.node_id(), failure.message(), failure);
  }
  switch (decision.action) {
    case RestartDecision::Action::kIgnore:
      break;
    case RestartDecision::Action::kRestart:
      EmitRestarting(decision.cause, decision.reason, clock_->Now());
      StopAllWorkers(decision.reason);
      break;
    case RestartDecision::Action::kReviewHang:
    case RestartDecision::Action::kStopThenFail: {
      // At a hang, every node's stacks, taken before its workers stop: where
      // the hung rank is, and where its peers wait for it.
      const bool hang = decision.action == RestartDecision::Action::kReviewHang ||
                        std::any_of(decision.recorded.begin(), decision.recorded.end(),
                                    [](const FailureInfo& f) { return f.hang(); });
      StopAllWorkers(decision.reason, /*take_stacks=*/hang);
      break;
    }
  }
}

void Job::EmitRestarting(RestartCause cause, const std::string& reason, absl::Time began) {
  JobEvent event = NewEvent(JobEvent::RESTARTING, "", reason);
  event.set_restart_cause(cause);
  SetEventTime(began, &event);
  StampCheckpoint(event);
  Publish(std::move(event));
}

void Job::StampCheckpoint(JobEvent& event) const {
  if (!generation_checkpoint_) return;
  event.set_last_checkpoint_unix_ms(absl::ToUnixMillis(*generation_checkpoint_));
  event.set_last_checkpoint_step(generation_checkpoint_step_);
}

void Job::StopAllWorkers(const std::string& reason, bool take_stacks) {
  SetJobState(JobState::kRestarting, &record_);
  round_.StopAwaitingMaster();
  stop_barrier_.Open(round_.members().by_rank, clock_->Now() + ShutdownTimeout(settings()));
  MarkJobDirty();
  for (const std::string& node_id : stop_barrier_.Awaited()) {
    Send(*membership_.Find(node_id), StopWorkers{round_.generation(), reason, take_stacks});
  }
  MaybeFinishStopBarrier();
}

absl::Status Job::WorkersStopped(const NodeRef& ref) {
  DDP_RETURN_IF_ERROR(
      membership_.Fence(ref, round_.generation(), /*exact_generation=*/true).status());
  if (state() == JobState::kRunning || state() == JobState::kStarting) {
    return absl::FailedPreconditionError(absl::StrCat("no stop of generation ", round_.generation(),
                                                      " was requested from node '", ref.node_id,
                                                      "'"));
  }
  if (state() == JobState::kRestarting && stop_barrier_.Confirm(ref.node_id)) {
    MaybeFinishStopBarrier();
  }
  return absl::OkStatus();  // duplicates and late confirmations are harmless
}

void Job::MaybeFinishStopBarrier() {
  if (state() != JobState::kRestarting || !stop_barrier_.complete()) return;
  StopOutcome outcome = restart_policy_.ConcludeStop();
  if (outcome.named_restart.has_value()) {
    EmitRestarting(outcome.named_restart->cause, outcome.named_restart->reason,
                   outcome.named_restart->began);
  }
  if (!outcome.fail_with.has_value()) {
    // Tick finishes the barrier once the leases of removed members ran out.
    if (clock_->Now() < stop_barrier_.fenced_until()) return;
    OpenRendezvous(/*after_restart=*/true);
    return;
  }
  Finish(JobState::kFailed, outcome.fail_with, outcome.fail_message);
}

void Job::Finish(JobState state, std::optional<FailureInfo> root_cause,
                 const std::string& message) {
  SetJobState(state, &record_);
  restart_policy_.Finish(std::move(root_cause));
  record_.set_finish_message(message);
  SetFinished(clock_->Now(), &record_);
  round_.Finish();
  stop_barrier_.Close();
  MarkJobDirty();
  for (const auto& [id, node] : membership_.nodes()) {
    Send(node, JobFinished{state, restart_policy_.root_cause(), record_.finish_message()});
  }
  JobEvent event =
      NewEvent(JobEvent::JOB_FINISHED, "", absl::StrCat(JobStateName(state), ": ", message),
               restart_policy_.root_cause());
  StampCheckpoint(event);
  Publish(std::move(event));
}

// ---- Scheduler operations (UpdateJob, CancelJob, ExcludeNode) ----

absl::Status Job::Update(int min_nodes, int max_nodes) {
  if (IsTerminal(state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", id(), "' already finished (", JobStateName(state()), "); it cannot be resized"));
  }
  JobSettings updated = settings();
  updated.set_min_nodes(min_nodes);
  updated.set_max_nodes(max_nodes);
  DDP_RETURN_IF_ERROR(ValidateJobSettings(updated, limits_));
  const JobSettings old = settings();
  *record_.mutable_settings() = updated;
  MarkJobDirty();
  Emit(JobEvent::JOB_UPDATED, "",
       absl::StrCat("nodes ", old.min_nodes(), ":", old.max_nodes(), " -> ", min_nodes, ":",
                    max_nodes));
  const int registered = membership_.size();
  // Membership must change when members exceed the new max, or when spares can
  // now fill places below it.
  const bool membership_changes =
      round_.members().live > max_nodes ||
      (round_.members().live < max_nodes && registered > round_.members().live);
  switch (state()) {
    case JobState::kWaiting:
      if (registered < min_nodes) round_.MinNoLongerReached();
      MaybeCloseRendezvous();
      break;
    case JobState::kStarting:
      if (membership_changes) OpenRendezvous(/*after_restart=*/true);
      break;
    case JobState::kRunning:
      if (membership_changes) {
        Decide(Disruption::MembershipChange(
            RestartCause::SCALE,
            absl::StrCat("job resized to ", min_nodes, ":", max_nodes, " nodes")));
      }
      break;
    default:  // kRestarting: the next rendezvous uses the new sizes.
      break;
  }
  return absl::OkStatus();
}

absl::Status Job::Cancel(const std::string& reason) {
  if (IsTerminal(state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", id(), "' already finished (", JobStateName(state()), ")"));
  }
  Finish(JobState::kCancelled, std::nullopt,
         absl::StrCat("cancelled: ", Utf8Prefix(reason, limits_.max_message_length)));
  return absl::OkStatus();
}

absl::Status Job::ExcludeNode(const std::string& node_id, const std::string& reason) {
  DDP_RETURN_IF_ERROR(ValidateId(node_id, "node id", limits_));
  if (IsTerminal(state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", id(), "' already finished (", JobStateName(state()), ")"));
  }
  DDP_ASSIGN_OR_RETURN(const bool newly_excluded, membership_.Exclude(node_id));
  if (!newly_excluded) return absl::OkStatus();
  MarkJobDirty();
  const std::string why =
      absl::StrCat("excluded by the scheduler: ", Utf8Prefix(reason, limits_.max_message_length));
  Node* node = membership_.Find(node_id);
  if (node != nullptr) {
    Send(*node, NodeDismissed{why});
    RemoveNode(node_id, why, RestartCause::OPERATOR);
  }
  return absl::OkStatus();
}

// ---- Timeouts. Tick is cheap when nothing is due (Membership::Silent). ----

void Job::RemoveSilentNodes(absl::Time now) {
  for (const std::string& id : membership_.Silent(now)) {
    if (IsTerminal(state())) break;
    RemoveNode(id,
               absl::StrCat("lost: no heartbeat or resumed session for ",
                            absl::FormatDuration(HeartbeatTimeout(settings()))),
               RestartCause::NODE_LOSS, /*workers_stopped=*/false, FailureInfo::LEASE_EXPIRED);
  }
}

void Job::ServingResumed(absl::Duration gap) {
  if (IsTerminal(state())) return;
  const absl::Time now = clock_->Now();
  membership_.ServingResumed(now);
  round_.Postpone(gap);
  stop_barrier_.Postpone(gap);
}

// ---- Drain and preemption; the straggler exclusion policy ----

absl::Status Job::DrainNode(const std::string& node_id, absl::Time leaves_at,
                            const std::string& reason) {
  DDP_RETURN_IF_ERROR(ValidateId(node_id, "node id", limits_));
  if (IsTerminal(state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", id(), "' already finished (", JobStateName(state()), ")"));
  }
  if (membership_.Find(node_id) == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("node '", Capped(node_id), "' is not registered in job '", id(), "'"));
  }
  const std::string why = reason.substr(0, limits_.max_message_length);
  auto [it, added] = draining_.try_emplace(node_id, Drain{leaves_at, why});
  if (!added && it->second.leaves_at <= leaves_at) return absl::OkStatus();  // earlier holds
  it->second = Drain{leaves_at, why};
  Node& drained = *membership_.Find(node_id);
  SetDrain(leaves_at, why, &drained.record);
  membership_.MarkDirty(node_id);  // stored: the drain survives a coordinator restart
  Emit(JobEvent::NODE_DRAINING, node_id,
       absl::StrCat("leaves by ", absl::FormatTime(leaves_at), " at the latest: ", why));
  if (state() == JobState::kRunning && IsMember(drained) && !drained.succeeded) {
    // Every member's workers get the notice: the checkpoint is often written
    // by a rank on another node, and all ranks say when they are ready.
    for (const std::string& member : round_.members().by_rank) {
      if (member.empty()) continue;
      if (const Node* node = membership_.Find(member)) {
        Send(*node, DrainNotice{round_.generation(), node_id, leaves_at, why});
      }
    }
  }
  ReleaseDrainingNodes();
  return absl::OkStatus();
}

absl::Status Job::Preempted(const NodeRef& ref, absl::Time leaves_at, const std::string& reason) {
  DDP_RETURN_IF_ERROR(
      membership_.Fence(ref, round_.generation(), /*exact_generation=*/false).status());
  return DrainNode(ref.node_id, leaves_at, absl::StrCat("preempted: ", reason));
}

absl::Status Job::ReadyToLeave(const NodeRef& ref) {
  DDP_ASSIGN_OR_RETURN(Node * node,
                       membership_.Fence(ref, round_.generation(), /*exact_generation=*/false));
  // A report of an older generation comes after the drain it answered took
  // place (a restart followed): nothing to do, and no reason to fence.
  if (ref.generation != round_.generation()) return absl::OkStatus();
  node->ready_to_leave = ref.generation;
  if (!draining_.empty()) ReleaseDrainingNodes();
  return absl::OkStatus();
}

bool Job::AllMembersReadyToLeave() const {
  if (state() != JobState::kRunning) return false;
  for (const std::string& member : round_.members().by_rank) {
    if (member.empty()) continue;
    const Node* node = membership_.Find(member);
    if (node != nullptr && !node->succeeded && node->ready_to_leave != round_.generation()) {
      return false;
    }
  }
  return true;
}

void Job::ReleaseDrainingNodes() {
  const absl::Time now = clock_->Now();
  const bool all_ready = AllMembersReadyToLeave();
  std::vector<std::pair<std::string, std::string>> leaving;  // id, why
  for (const auto& [id, drain] : draining_) {
    const Node* node = membership_.Find(id);
    const bool runs_workers =
        node != nullptr && state() == JobState::kRunning && IsMember(*node) && !node->succeeded;
    if (!runs_workers) {
      leaving.emplace_back(id, absl::StrCat("drained: ", drain.reason));
    } else if (all_ready) {
      leaving.emplace_back(id, absl::StrCat("drained (the workers were ready): ", drain.reason));
    } else if (drain.leaves_at <= now) {
      leaving.emplace_back(id, absl::StrCat("drained (its time to leave came): ", drain.reason));
    }
  }
  for (const auto& [id, why] : leaving) {
    draining_.erase(id);
    if (IsTerminal(state())) continue;
    const Node* node = membership_.Find(id);
    if (node == nullptr) continue;
    Send(*node, NodeDismissed{why, /*drained=*/true});
    RemoveNode(id, why, RestartCause::DRAIN);
  }
}

void Job::ExcludeLastingStragglers(absl::Time now) {
  if (settings().straggler_exclude_factor() == 0 || state() != JobState::kRunning ||
      now < next_straggler_check_) {
    return;
  }
  next_straggler_check_ = now + HeartbeatInterval(settings());
  // Scored on copies: the reports keep no policy's marks (Status scores them
  // with the default factor for display).
  std::vector<std::pair<Node*, std::vector<WorkerProgress>>> scored;
  std::vector<WorkerProgress*> reports;
  for (const std::string& member : round_.members().by_rank) {
    if (member.empty()) continue;
    Node* node = membership_.Find(member);
    if (node == nullptr) continue;
    scored.emplace_back(node, node->progress);
  }
  for (auto& [node, progress] : scored) {
    for (WorkerProgress& p : progress) reports.push_back(&p);
  }
  ScoreStragglers(reports, round_.generation(), settings().straggler_exclude_factor());
  std::vector<std::pair<std::string, double>> excluded;  // id, its slowest speed
  for (auto& [node, progress] : scored) {
    double slowest = 0;
    for (const WorkerProgress& p : progress) {
      if (p.straggler && (slowest == 0 || p.relative_speed < slowest)) slowest = p.relative_speed;
    }
    if (slowest == 0) {
      node->slow_since.reset();
      continue;
    }
    if (!node->slow_since) node->slow_since = now;
    if (now - *node->slow_since >= StragglerExcludeAfter(settings()) &&
        !draining_.count(node->record.node_id())) {
      excluded.emplace_back(node->record.node_id(), slowest);
    }
  }
  for (const auto& [id, speed] : excluded) {
    if (state() != JobState::kRunning) break;  // the first one restarts the generation
    (void)membership_.Exclude(id);             // a full list still drains it
    MarkJobDirty();
    (void)DrainNode(
        id, now,
        absl::StrCat("straggler: a rank ran at ", absl::StrFormat("%.2f", speed),
                     " of the median speed for ",
                     absl::FormatDuration(StragglerExcludeAfter(settings())),
                     " (straggler_exclude_factor ", settings().straggler_exclude_factor(), ")"));
  }
}

void Job::DeclareIdleHang(absl::Time now) {
  if (HangTimeout(settings()) == absl::ZeroDuration() || state() != JobState::kRunning ||
      now < next_idle_check_ || round_.members().by_rank.size() < 2) {
    return;
  }
  next_idle_check_ = now + HeartbeatInterval(settings());
  std::vector<MemberIdleness> members;
  for (const std::string& member : round_.members().by_rank) {
    const Node* node = member.empty() ? nullptr : membership_.Find(member);
    if (node == nullptr) return;  // a member left: its restart is under way
    if (node->succeeded) continue;
    members.push_back(MemberIdleness{member, node->record.global_rank_offset(), &node->idleness});
  }
  const std::optional<IdleHang> hang = FindIdleHang(members, HangTimeout(settings()), now);
  if (!hang.has_value()) return;
  Node* node = membership_.Find(hang->node_id);
  // Its agent's own report of that worker, if one comes, is a repeat.
  if (node->exited.empty()) node->exited.assign(node->record.nproc(), false);
  node->exited[hang->local_rank] = true;
  FailureInfo failure = NodeFailure(hang->node_id, round_.generation(), hang->idle_since,
                                    DescribeIdleHang(*hang, now));
  failure.set_local_rank(hang->local_rank);
  failure.set_global_rank(hang->global_rank);
  failure.set_hang(true);
  DDP_LOG(WARNING) << "job " << id() << ": " << failure.message();
  Decide(Disruption::WorkerFailure(std::move(failure)), LostPeerOf(hang->node_id));
}

void Job::Tick() {
  if (IsTerminal(state())) return;
  const absl::Time now = clock_->Now();
  RemoveSilentNodes(now);
  ExcludeLastingStragglers(now);
  DeclareIdleHang(now);
  if (!draining_.empty()) ReleaseDrainingNodes();
  switch (state()) {
    case JobState::kWaiting:
      if (round_.LastCallOver(now, LastCallTimeout(settings()))) {
        CloseRendezvous();
      } else if (round_.JoinTimedOut(now)) {
        FailureInfo failure =
            NodeFailure("", round_.generation(), now,
                        absl::StrCat("rendezvous timed out: ", membership_.size(),
                                     " of min_nodes=", settings().min_nodes(),
                                     " nodes joined within the join timeout of ",
                                     absl::FormatDuration(JoinTimeout(settings()))));
        Finish(JobState::kFailed, failure, failure.message());
      }
      break;
    case JobState::kStarting:
      if (round_.MasterInfoOverdue(now)) {
        if (round_.members().by_rank.empty() || round_.members().by_rank[0].empty()) {
          // No group rank 0 to ask (a stored job restored without it): form again.
          OpenRendezvous(/*after_restart=*/true);
        } else {
          // Group rank 0 did not answer: declare it dead and form again.
          RemoveNode(round_.members().by_rank[0],
                     absl::StrCat("declared dead: no master info within ",
                                  absl::FormatDuration(ShutdownTimeout(settings()))),
                     RestartCause::NODE_LOSS, /*workers_stopped=*/false,
                     FailureInfo::DECLARED_DEAD);
        }
      }
      break;
    case JobState::kRestarting:
      if (stop_barrier_.complete()) {
        MaybeFinishStopBarrier();  // waiting for the leases of removed members
      } else if (now >= stop_barrier_.deadline()) {
        for (const std::string& id : stop_barrier_.Awaited()) {
          RemoveNode(id,
                     absl::StrCat("declared dead: workers not confirmed stopped within ",
                                  absl::FormatDuration(ShutdownTimeout(settings()))),
                     RestartCause::NODE_LOSS, /*workers_stopped=*/false,
                     FailureInfo::DECLARED_DEAD);
        }
      }
      break;
    default:
      break;
  }
}

}  // namespace ddp::rendezvous
