// Job: construction, restore, status, fencing, events and the persistence
// delta. Membership inputs live in job_membership.cc, generation handling in
// job_generation.cc, scheduler operations in job_scheduler_ops.cc, timeouts in
// job_timers.cc.

#include "coordinator/rendezvous/job.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ddp::rendezvous {

Job::Job(const JobRecord& r, const RendezvousLimits& limits, const Clock& clock, Outbox* outbox)
    : id_(r.job_id),
      settings_(r.settings),
      limits_(limits),
      clock_(&clock),
      outbox_(outbox),
      created_(r.created),
      run_(r.run),
      finished_(r.finished),
      token_hash_(r.token_hash),
      state_(r.state),
      restart_policy_(RestartPolicy::Options{r.settings.max_restarts, limits.max_retained_failures,
                                             limits.max_message_length},
                      r.restart_count, r.root_cause, r.failures),
      finish_message_(r.finish_message),
      round_(r.generation, r.master),
      membership_(r.job_id, Membership::OptionsFor(r.settings, limits), clock, r.excluded_nodes,
                  r.next_join_seq),
      last_event_index_(r.last_event_index) {}

// A new job is the record of one that was never stored, plus its first event
// and an open rendezvous.
JobRecord Job::NewRecord(std::string job_id, const JobSettings& settings, const Clock& clock) {
  JobRecord record;
  record.job_id = std::move(job_id);
  record.settings = settings;
  record.created = clock.Now();
  return record;
}

Job::Job(std::string job_id, const JobSettings& settings, const RendezvousLimits& limits,
         const Clock& clock, Outbox* outbox)
    : Job(NewRecord(std::move(job_id), settings, clock), limits, clock, outbox) {
  Emit(JobEventType::kJobCreated, "",
       absl::StrCat("job created: nodes ", settings_.min_nodes, ":", settings_.max_nodes,
                    ", max_restarts ", settings_.max_restarts));
  OpenRendezvous(/*after_restart=*/false);
}

absl::StatusOr<std::unique_ptr<Job>> Job::Restore(const JobSnapshot& snapshot,
                                                  const RendezvousLimits& limits,
                                                  const Clock& clock, Outbox* outbox) {
  const JobRecord& r = snapshot.job;
  absl::Status status = ValidateJobSettings(r.settings, limits);
  if (!status.ok()) {
    return absl::DataLossError(
        absl::StrCat("stored job '", Capped(r.job_id), "': ", status.message()));
  }
  std::unique_ptr<Job> job(new Job(r, limits, clock, outbox));
  DDP_RETURN_IF_ERROR(job->RestoreEvents(snapshot.events));
  const absl::Time now = clock.Now();
  bool has_members = job->state_ == JobState::kStarting || job->state_ == JobState::kRunning ||
                     job->state_ == JobState::kRestarting;
  DDP_RETURN_IF_ERROR(job->membership_.Restore(snapshot.nodes, limits));
  if (has_members) {
    std::vector<std::pair<std::string, int>> ranks;
    for (const auto& [id, node] : job->membership_.nodes()) {
      ranks.emplace_back(id, node.record.group_rank);
    }
    DDP_RETURN_IF_ERROR(job->round_.RestoreMembers(ranks, r.world_size, r.job_id));
  }
  switch (job->state_) {
    case JobState::kWaiting:
      job->OpenRendezvous(/*after_restart=*/false);
      break;
    case JobState::kStarting:
      job->round_.AwaitMasterUntil(now + r.settings.shutdown_timeout);
      break;
    case JobState::kRestarting:
      // Confirmations were not stored: ask again on resume.
      job->stop_barrier_.Open(job->round_.members().by_rank, now + r.settings.shutdown_timeout);
      // A member removed before the coordinator stopped (its ranks are
      // missing from the stored members) may still run workers until its
      // lease runs out; its last heartbeat was before now.
      if (job->MemberProcesses() < job->round_.members().world_size) {
        job->stop_barrier_.FenceUntil(now + r.settings.heartbeat_timeout);
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
    if (event.index <= previous || event.index > last_event_index_ || event.job_id != id_) {
      return absl::DataLossError(absl::StrCat(
          "stored event ", event.index, " of job '", Capped(id_), "' is inconsistent (after event ",
          previous, ", last event ", last_event_index_, ", of job '", Capped(event.job_id), "')"));
    }
    previous = event.index;
  }
  // A lower retention than the stored events had keeps the newest.
  const size_t keep = static_cast<size_t>(std::max(0, limits_.max_retained_events));
  const size_t skip = stored.size() > keep ? stored.size() - keep : 0;
  events_.assign(stored.begin() + static_cast<std::ptrdiff_t>(skip), stored.end());
  events_dropped_ = skip > 0;
  // Every stored event is durable; those after them were lost with the batch
  // that carried them, which no one was told of.
  events_taken_index_ = last_event_index_;
  return absl::OkStatus();
}

int64_t Job::MemberProcesses() const {
  int64_t processes = 0;
  for (const std::string& id : round_.members().by_rank) {
    if (!id.empty()) processes += membership_.nodes().at(id).record.nproc;
  }
  return processes;
}

JobStatus StatusOfPastRun(const JobRecord& r) {
  JobStatus s;
  s.job_id = r.job_id;
  s.settings = r.settings;
  s.state = r.state;
  s.generation = r.generation;
  s.restart_count = r.restart_count;
  s.world_size = r.world_size;
  s.root_cause = r.root_cause;
  s.finish_message = r.finish_message;
  s.failures = r.failures;
  s.excluded_nodes = r.excluded_nodes;
  s.last_event_index = r.last_event_index;
  s.created = r.created;
  s.run = r.run;
  s.finished = r.finished;
  return s;
}

bool Job::IsMember(const Node& node) const {
  int rank = node.record.group_rank;
  return (state_ == JobState::kStarting || state_ == JobState::kRunning ||
          state_ == JobState::kRestarting) &&
         round_.members().Holds(rank, node.record.node_id);
}

void Job::Emit(JobEventType type, const std::string& node_id, const std::string& message,
               std::optional<FailureInfo> failure) {
  Publish(NewEvent(type, node_id, message, std::move(failure)));
}

JobEvent Job::NewEvent(JobEventType type, const std::string& node_id, const std::string& message,
                       std::optional<FailureInfo> failure) const {
  JobEvent event;
  event.job_id = id_;
  event.time = clock_->Now();
  event.type = type;
  event.node_id = node_id;
  event.generation = round_.generation();
  event.message = message;
  event.failure = std::move(failure);
  return event;
}

void Job::Publish(JobEvent event) {
  event.index = ++last_event_index_;
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
  message.job_id = id_;
  message.node_id = node.record.node_id;
  message.incarnation = node.record.incarnation;
  message.body = std::move(body);
  outbox_->messages.push_back(std::move(message));
}

JobRecord Job::MakeRecord() const {
  JobRecord r;
  r.job_id = id_;
  r.settings = settings_;
  r.state = state_;
  r.generation = round_.generation();
  r.restart_count = restart_policy_.restart_count();
  r.root_cause = restart_policy_.root_cause();
  r.finish_message = finish_message_;
  r.failures = restart_policy_.failures();
  r.excluded_nodes = membership_.ExcludedSorted();
  r.master = round_.master();
  r.world_size = round_.members().world_size;
  r.last_event_index = last_event_index_;
  r.created = created_;
  r.run = run_;
  r.finished = finished_;
  r.token_hash = token_hash_;
  r.next_join_seq = membership_.next_join_seq();
  return r;
}

JobChanges Job::TakeChanges() {
  JobChanges changes;
  changes.job_id = id_;
  if (job_dirty_) changes.job = MakeRecord();
  if (counters_dirty_ || job_dirty_) {
    changes.counters = JobCounters{last_event_index_, membership_.next_join_seq()};
  }
  membership_.TakeChanges(changes);
  // The events emitted since the last call (read from events_, so that what
  // was set on an event after Emit, its restart cause, is stored too).
  auto first_new =
      std::upper_bound(events_.begin(), events_.end(), events_taken_index_,
                       [](int64_t index, const JobEvent& event) { return index < event.index; });
  changes.appended_events.assign(first_new, events_.end());
  events_taken_index_ = last_event_index_;  // any others left events_ before they were taken
  if (events_dropped_) {
    changes.drop_events_before = events_.empty() ? last_event_index_ + 1 : events_.front().index;
    events_dropped_ = false;
  }
  job_dirty_ = false;
  counters_dirty_ = false;
  return changes;
}

JobStatus Job::Status(bool include_nodes) const {
  JobStatus s;
  s.job_id = id_;
  s.settings = settings_;
  s.state = state_;
  s.generation = round_.generation();
  s.restart_count = restart_policy_.restart_count();
  s.registered_nodes = membership_.size();
  s.member_nodes = round_.members().live;
  s.world_size = round_.members().world_size;
  s.root_cause = restart_policy_.root_cause();
  s.finish_message = finish_message_;
  s.failures = restart_policy_.failures();
  s.excluded_nodes = membership_.ExcludedSorted();
  s.last_event_index = last_event_index_;
  s.first_event_index = events_.empty() ? 0 : events_.front().index;
  s.created = created_;
  s.run = run_;
  s.finished = finished_;
  if (include_nodes) {
    for (const auto& [id, node] : membership_.nodes()) {
      NodeStatus n;
      n.node_id = id;
      n.incarnation = node.record.incarnation;
      n.nproc = node.record.nproc;
      n.group_rank = IsMember(node) ? node.record.group_rank : -1;
      n.address = node.record.address;
      n.connected = node.connected;
      n.last_heartbeat = node.last_heartbeat;
      s.nodes.push_back(std::move(n));
    }
    std::sort(s.nodes.begin(), s.nodes.end(),
              [](const NodeStatus& a, const NodeStatus& b) { return a.node_id < b.node_id; });
  }
  return s;
}

absl::StatusOr<std::vector<JobEvent>> Job::EventsSince(int64_t after_index, int limit) const {
  std::vector<JobEvent> out;
  if (events_.empty()) return out;
  int64_t first = events_.front().index;
  if (after_index + 1 < first) {
    return absl::OutOfRangeError(absl::StrCat("events after index ", after_index, " of job '", id_,
                                              "' were dropped; the oldest retained is ", first,
                                              "; read the job status and watch from there"));
  }
  size_t start = after_index < first ? 0 : static_cast<size_t>(after_index + 1 - first);
  for (size_t i = start; i < events_.size() && static_cast<int>(out.size()) < limit; ++i) {
    out.push_back(events_[i]);
  }
  return out;
}

}  // namespace ddp::rendezvous
