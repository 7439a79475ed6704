#include "coordinator/rendezvous/job_state_store.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ddp::rendezvous {

namespace {
int64_t UnixNanosOrZero(absl::Time t) { return t == absl::Time() ? 0 : absl::ToUnixNanos(t); }
absl::Time TimeOrUnknown(int64_t unix_ns) {
  return unix_ns == 0 ? absl::Time() : absl::FromUnixNanos(unix_ns);
}
}  // namespace

JobRecord NewJobRecord(std::string job_id, JobSettings settings, absl::Time created) {
  JobRecord record;
  record.set_job_id(std::move(job_id));
  *record.mutable_settings() = std::move(settings);
  SetJobState(JobState::kWaiting, &record);
  SetCreated(created, &record);
  record.set_run(1);
  SetCounters(JobCounters{}, &record);
  return record;
}

JobState JobStateOf(const JobRecord& record) { return static_cast<JobState>(record.state()); }
void SetJobState(JobState state, JobRecord* record) {
  record->set_state(static_cast<int32_t>(state));
}

absl::Time CreatedAt(const JobRecord& record) { return TimeOrUnknown(record.created_unix_ns()); }
absl::Time FinishedAt(const JobRecord& record) { return TimeOrUnknown(record.finished_unix_ns()); }
void SetCreated(absl::Time created, JobRecord* record) {
  record->set_created_unix_ns(UnixNanosOrZero(created));
}
void SetFinished(absl::Time finished, JobRecord* record) {
  record->set_finished_unix_ns(UnixNanosOrZero(finished));
}

std::optional<FailureInfo> RootCauseOf(const JobRecord& record) {
  if (!record.has_cause()) return std::nullopt;
  return record.cause();
}

JobCounters CountersOf(const JobRecord& record) {
  return JobCounters{record.last_event_index(), record.next_join_seq()};
}
void SetCounters(const JobCounters& counters, JobRecord* record) {
  record->set_last_event_index(counters.last_event_index);
  record->set_next_join_seq(counters.next_join_seq);
}

NodeRecord NewNodeRecord(std::string node_id) {
  NodeRecord node;
  node.set_node_id(std::move(node_id));
  node.set_nproc(1);
  node.set_requested_rank(-1);
  node.set_group_rank(-1);
  return node;
}

std::optional<absl::Time> DrainLeavesAt(const NodeRecord& node) {
  if (node.drain_leaves_at_unix_ms() == 0) return std::nullopt;
  return absl::FromUnixMillis(node.drain_leaves_at_unix_ms());
}

void SetDrain(absl::Time leaves_at, std::string reason, NodeRecord* node) {
  // At least 1: 0 means no drain.
  node->set_drain_leaves_at_unix_ms(std::max<int64_t>(1, absl::ToUnixMillis(leaves_at)));
  node->set_drain_reason(std::move(reason));
}

absl::Status JobStateStore::ApplyBatch(const std::vector<JobChanges>& batch) {
  for (const JobChanges& changes : batch) {
    DDP_RETURN_IF_ERROR(Apply(changes));
  }
  return absl::OkStatus();
}

void JobEventCounts::Add(JobEventType type, RestartCause cause, int64_t n) {
  counts[{type, type == JobEvent::RESTARTING ? cause : RestartCause::RESTART_CAUSE_UNSPECIFIED}] +=
      n;
}

void JobEventCounts::Add(const JobEvent& event) { Add(event.type(), event.restart_cause(), 1); }

int64_t JobEventCounts::Of(JobEventType type, RestartCause cause) const {
  auto it = counts.find({type, cause});
  return it == counts.end() ? 0 : it->second;
}

void JobChanges::Merge(JobChanges later) {
  if (later.job_removed) {
    *this = std::move(later);
    return;
  }
  if (later.job) job = std::move(later.job);
  if (later.counters) counters = later.counters;
  for (JobEvent& event : later.appended_events) appended_events.push_back(std::move(event));
  drop_events_before = std::max(drop_events_before, later.drop_events_before);
  absl::flat_hash_map<std::string, size_t> index;
  for (size_t i = 0; i < upserted_nodes.size(); ++i) {
    index[upserted_nodes[i].node_id()] = i;
  }
  absl::flat_hash_map<std::string, bool> removed_later;
  for (const std::string& id : later.removed_nodes) removed_later[id] = true;
  std::vector<NodeRecord> kept;
  for (NodeRecord& node : upserted_nodes) {
    if (!removed_later.contains(node.node_id())) kept.push_back(std::move(node));
  }
  upserted_nodes = std::move(kept);
  index.clear();
  for (size_t i = 0; i < upserted_nodes.size(); ++i) {
    index[upserted_nodes[i].node_id()] = i;
  }
  for (const std::string& id : later.removed_nodes) removed_nodes.push_back(id);
  for (NodeRecord& node : later.upserted_nodes) {
    auto it = index.find(node.node_id());
    if (it != index.end()) {
      upserted_nodes[it->second] = std::move(node);
    } else {
      index[node.node_id()] = upserted_nodes.size();
      upserted_nodes.push_back(std::move(node));
    }
  }
}

void InMemoryJobStateStore::ApplyLocked(const JobChanges& changes) {
  if (changes.job_removed) {
    auto removed = jobs_.find(changes.job_id);
    if (!changes.archived_run || removed == jobs_.end()) {
      jobs_.erase(changes.job_id);
      return;
    }
    StoredJob kept;
    kept.past_runs = std::move(removed->second.past_runs);
    kept.past_runs.erase(kept.past_runs.begin(),
                         kept.past_runs.lower_bound(changes.keep_runs_from));
    kept.past_runs[changes.archived_run->run()] = *changes.archived_run;
    removed->second = std::move(kept);
    return;
  }
  auto it = jobs_.try_emplace(changes.job_id).first;  // checked: it has a record or gets one
  if (changes.job) {
    it->second.job = *changes.job;
    it->second.has_record = true;
  }
  if (changes.counters) SetCounters(*changes.counters, &it->second.job);
  // Removals first: a batch that removes and re-adds a node ends with the node.
  for (const std::string& id : changes.removed_nodes) it->second.nodes.erase(id);
  for (const NodeRecord& node : changes.upserted_nodes) {
    it->second.nodes[node.node_id()] = node;
  }
  std::map<int64_t, JobEvent>& events = it->second.events;
  for (const JobEvent& event : changes.appended_events) {
    events[event.index()] = event;
    counts_.Add(event);
  }
  if (changes.drop_events_before > 0) {
    events.erase(events.begin(), events.lower_bound(changes.drop_events_before));
  }
}

absl::Status InMemoryJobStateStore::CheckRecordsLocked(const std::vector<JobChanges>& batch) const {
  std::map<std::string, bool> has_record;  // as the batch goes
  for (const JobChanges& changes : batch) {
    auto [record, first] = has_record.try_emplace(changes.job_id);
    if (first) {
      auto stored = jobs_.find(changes.job_id);
      record->second = stored != jobs_.end() && stored->second.has_record;
    }
    if (changes.job_removed) {
      record->second = false;
      continue;
    }
    if (!record->second && !changes.job) {
      return absl::InvalidArgumentError(absl::StrCat("node changes or events for job '",
                                                     changes.job_id, "' which has no record"));
    }
    record->second = true;
  }
  return absl::OkStatus();
}

absl::Status InMemoryJobStateStore::Apply(const JobChanges& changes) {
  return ApplyBatch({changes});
}

absl::Status InMemoryJobStateStore::ApplyBatch(const std::vector<JobChanges>& batch) {
  absl::MutexLock lock(&mu_);
  if (!fail_with_.ok()) return fail_with_;
  ++apply_count_;
  // All or nothing: the only refusal is a change to a job without a record,
  // so the whole batch is checked first and then applied in place (no copy of
  // a job: a batch of 4,096 joins stays linear).
  DDP_RETURN_IF_ERROR(CheckRecordsLocked(batch));
  for (const JobChanges& changes : batch) ApplyLocked(changes);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<JobSnapshot>> InMemoryJobStateStore::LoadAll() const {
  absl::MutexLock lock(&mu_);
  std::vector<JobSnapshot> out;
  for (const auto& [id, stored] : jobs_) {
    if (!stored.has_record) continue;
    JobSnapshot snapshot;
    snapshot.job = stored.job;
    for (const auto& [node_id, node] : stored.nodes) {
      snapshot.nodes.push_back(node);
    }
    for (const auto& [run, record] : stored.past_runs) snapshot.past_runs.push_back(record);
    for (const auto& [index, event] : stored.events) snapshot.events.push_back(event);
    out.push_back(std::move(snapshot));
  }
  return out;
}

absl::StatusOr<JobEventCounts> InMemoryJobStateStore::LoadEventCounts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

void InMemoryJobStateStore::FailWith(absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_with_ = std::move(status);
}

int InMemoryJobStateStore::apply_count() const {
  absl::MutexLock lock(&mu_);
  return apply_count_;
}

}  // namespace ddp::rendezvous
