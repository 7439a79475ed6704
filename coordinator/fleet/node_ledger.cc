#include "coordinator/fleet/node_ledger.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddp::fleet {
namespace {

constexpr absl::Duration kMinWindow = absl::Seconds(1);
constexpr absl::Duration kMaxWindow = absl::Hours(24 * 30);

// A node the job lost (its lease expired, declared dead), rather than one
// that left, was excluded or drained: a lease-lost incident.
bool IsLostLease(const rendezvous::JobEvent& event) {
  return event.has_failure() &&
         event.failure().node_loss() != rendezvous::FailureInfo::NODE_LOSS_UNSPECIFIED;
}

std::string Quoted(const std::string& s, size_t max = 128) {
  return absl::StrCat("'", absl::CHexEscape(s.substr(0, max)), s.size() > max ? "...'" : "'");
}

// The ledger holds `max_nodes` and `node_id` is not among them.
absl::Status LedgerFull(int max_nodes, const std::string& node_id) {
  return absl::ResourceExhaustedError(absl::StrCat("the coordinator records at most ", max_nodes,
                                                   " nodes; node ", Quoted(node_id),
                                                   " is one too many"));
}

std::string FormatUnixMs(int64_t ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(ms), absl::UTCTimeZone());
}

// The first line of a check's output, cut short: for messages.
std::string Headline(const std::string& output) {
  std::string line = output.substr(0, output.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return line;
}

}  // namespace

absl::Status ValidateQuarantinePolicy(const QuarantinePolicy& policy) {
  if (policy.after < 0 || policy.after > kMaxQuarantineAfter) {
    return absl::InvalidArgumentError(absl::StrCat("quarantine-after ", policy.after,
                                                   " is outside [0, ", kMaxQuarantineAfter,
                                                   "]; give 0 (never) or a count >= 1"));
  }
  if (policy.after > 0 && (policy.window < kMinWindow || policy.window > kMaxWindow)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quarantine-window ", absl::FormatDuration(policy.window), " is outside [",
        absl::FormatDuration(kMinWindow), ", ", absl::FormatDuration(kMaxWindow), "]"));
  }
  return absl::OkStatus();
}

v1::QuarantinePolicy QuarantinePolicyToProto(const QuarantinePolicy& policy) {
  v1::QuarantinePolicy out;
  out.set_after(policy.after);
  out.set_window_ms(absl::ToInt64Milliseconds(policy.window));
  return out;
}

absl::StatusOr<QuarantinePolicy> QuarantinePolicyFromProto(int64_t after, int64_t window_ms) {
  if (after < 0 || after > kMaxQuarantineAfter) {
    return absl::InvalidArgumentError(
        absl::StrCat("quarantine-after ", after, " is outside [0, ", kMaxQuarantineAfter, "]"));
  }
  QuarantinePolicy policy;
  policy.after = static_cast<int>(after);
  if (window_ms != 0 || after != 0) {
    const int64_t max_ms = absl::ToInt64Milliseconds(kMaxWindow);
    if (window_ms < 0 || window_ms > max_ms) {  // before absl::Milliseconds could saturate
      return absl::InvalidArgumentError(
          absl::StrCat("quarantine window_ms ", window_ms, " is outside [1000, ", max_ms, "]"));
    }
    policy.window = absl::Milliseconds(window_ms);
  }
  if (absl::Status valid = ValidateQuarantinePolicy(policy); !valid.ok()) return valid;
  return policy;
}

const char* NodeStateName(v1::NodeState state) {
  switch (state) {
    case v1::NODE_READY:
      return "ready";
    case v1::NODE_CORDONED:
      return "cordoned";
    case v1::NODE_QUARANTINED:
      return "quarantined";
    default:
      return "unspecified";
  }
}

NodeLedger::NodeLedger(const Clock& clock, NodeLedgerOptions options)
    : clock_(clock), options_(std::move(options)), policy_(options_.quarantine) {}

absl::Status NodeLedger::Restore(std::vector<v1::Node> nodes,
                                 std::optional<v1::QuarantinePolicy> policy) {
  absl::MutexLock lock(&mu_);
  if (policy.has_value()) {
    absl::StatusOr<QuarantinePolicy> stored =
        QuarantinePolicyFromProto(policy->after(), policy->window_ms());
    if (!stored.ok()) {
      return absl::DataLossError(
          absl::StrCat("the stored quarantine policy is invalid: ", stored.status().message()));
    }
    policy_ = *stored;
    policy_set_unix_ms_ = policy->set_unix_ms();
  }
  nodes_.clear();
  earliest_.clear();
  for (v1::Node& node : nodes) {
    for (const v1::NodeIncident& incident : node.incidents()) {
      const bool worker = incident.kind() == v1::NODE_INCIDENT_WORKER_FAILED ||
                          incident.kind() == v1::NODE_INCIDENT_HANG;
      if (worker && incident.counted()) {
        earliest_[{incident.job_id(), incident.generation()}] = {node.node_id(),
                                                                 incident.time_unix_ms()};
      }
    }
    std::string id = node.node_id();
    nodes_[std::move(id)] = std::move(node);
  }
  return absl::OkStatus();
}

v1::QuarantinePolicy NodeLedger::Policy() const {
  absl::MutexLock lock(&mu_);
  v1::QuarantinePolicy out = QuarantinePolicyToProto(policy_);
  out.set_set_unix_ms(policy_set_unix_ms_);
  return out;
}

absl::StatusOr<v1::QuarantinePolicy> NodeLedger::SetPolicy(const QuarantinePolicy& policy) {
  if (absl::Status valid = ValidateQuarantinePolicy(policy); !valid.ok()) return valid;
  v1::QuarantinePolicy out = QuarantinePolicyToProto(policy);
  {
    absl::MutexLock lock(&mu_);
    policy_ = policy;
    policy_set_unix_ms_ = absl::ToUnixMillis(clock_.Now());
    policy_dirty_ = true;
    out.set_set_unix_ms(policy_set_unix_ms_);
  }
  NotifyChange();
  return out;
}

std::optional<v1::QuarantinePolicy> NodeLedger::TakeDirtyPolicy() {
  absl::MutexLock lock(&mu_);
  if (!policy_dirty_) return std::nullopt;
  policy_dirty_ = false;
  v1::QuarantinePolicy out = QuarantinePolicyToProto(policy_);
  out.set_set_unix_ms(policy_set_unix_ms_);
  return out;
}

void NodeLedger::MarkPolicyDirty() {
  absl::MutexLock lock(&mu_);
  policy_dirty_ = true;
}

v1::Node* NodeLedger::FindOrAddLocked(const std::string& node_id) {
  auto it = nodes_.find(node_id);
  if (it != nodes_.end()) return &it->second;
  if (static_cast<int>(nodes_.size()) >= options_.max_nodes) return nullptr;
  v1::Node& node = nodes_[node_id];
  node.set_node_id(node_id);
  node.set_state(v1::NODE_READY);
  node.set_state_since_unix_ms(absl::ToUnixMillis(clock_.Now()));
  MarkDirtyLocked(node_id);
  return &node;
}

void NodeLedger::MarkDirtyLocked(const std::string& node_id) { dirty_.insert(node_id); }

void NodeLedger::NotifyChange() {
  if (options_.on_change) options_.on_change();
}

void NodeLedger::SetStateLocked(v1::Node& node, v1::NodeState state, std::string reason) {
  node.set_state(state);
  node.set_state_reason(std::move(reason));
  node.set_state_since_unix_ms(absl::ToUnixMillis(clock_.Now()));
  MarkDirtyLocked(node.node_id());
}

void NodeLedger::AddIncidentLocked(v1::Node& node, v1::NodeIncident incident) {
  *node.add_incidents() = std::move(incident);
  node.set_incident_count(node.incident_count() + 1);
  const int excess = node.incidents_size() - options_.max_incidents_per_node;
  if (excess > 0) node.mutable_incidents()->DeleteSubrange(0, excess);
  MarkDirtyLocked(node.node_id());
  ApplyPolicyLocked(node);
}

void NodeLedger::ApplyPolicyLocked(v1::Node& node) {
  const QuarantinePolicy& policy = policy_;
  if (policy.after <= 0 || node.state() != v1::NODE_READY) return;
  const int64_t from = absl::ToUnixMillis(clock_.Now() - policy.window);
  std::vector<std::string> counted;
  for (const v1::NodeIncident& incident : node.incidents()) {
    if (!incident.counted() || incident.time_unix_ms() < from) continue;
    counted.push_back(absl::StrCat(
        incident.job_id().empty() ? "" : absl::StrCat("job ", Quoted(incident.job_id()), " "),
        incident.cause(), " at ", FormatUnixMs(incident.time_unix_ms())));
  }
  if (static_cast<int>(counted.size()) < policy.after) return;
  SetStateLocked(node, v1::NODE_QUARANTINED,
                 absl::StrCat(counted.size(), " incidents within ",
                              absl::FormatDuration(policy.window), " (quarantine policy: after ",
                              policy.after, "): ", absl::StrJoin(counted, "; ")));
}

absl::Status NodeLedger::ValidateChecks(const std::string& node_id,
                                        const std::vector<v1::HealthCheckResult>& checks) const {
  if (node_id.empty() || static_cast<int>(node_id.size()) > options_.max_id_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("node id of ", node_id.size(), " bytes; give 1 to ", options_.max_id_bytes));
  }
  if (static_cast<int>(checks.size()) > options_.max_checks) {
    return absl::InvalidArgumentError(
        absl::StrCat(checks.size(), " health check results from node ", Quoted(node_id),
                     "; at most ", options_.max_checks));
  }
  for (const v1::HealthCheckResult& check : checks) {
    if (check.name().empty() ||
        static_cast<int>(check.name().size()) > options_.max_check_name_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "health check name ", Quoted(check.name()), " of ", check.name().size(),
          " bytes from node ", Quoted(node_id), "; give 1 to ", options_.max_check_name_bytes));
    }
  }
  return absl::OkStatus();
}

std::string NodeLedger::RecordChecksLocked(v1::Node& node, const std::string& job_id,
                                           int64_t generation,
                                           const std::vector<v1::HealthCheckResult>& checks) {
  const int64_t now_ms = absl::ToUnixMillis(clock_.Now());
  std::string first_failure;
  for (v1::HealthCheckResult check : checks) {
    std::string* output = check.mutable_output();
    if (static_cast<int>(output->size()) > options_.max_check_output_bytes) {
      *output = output->substr(output->size() - options_.max_check_output_bytes);
    }
    if (check.time_unix_ms() == 0) check.set_time_unix_ms(now_ms);
    auto* results = node.mutable_checks();
    auto same = std::find_if(results->begin(), results->end(), [&](const v1::HealthCheckResult& r) {
      return r.name() == check.name();
    });
    if (same != results->end()) {
      *same = check;
    } else {
      *results->Add() = check;
    }
    if (check.passed()) continue;
    const std::string why =
        absl::StrCat("health check ", Quoted(check.name()), " failed: ", Headline(check.output()));
    v1::NodeIncident incident;
    incident.set_kind(v1::NODE_INCIDENT_CHECK_FAILED);
    incident.set_job_id(job_id);
    incident.set_generation(generation);
    incident.set_time_unix_ms(now_ms);
    incident.set_cause(why);
    incident.set_counted(true);
    AddIncidentLocked(node, std::move(incident));
    if (first_failure.empty()) first_failure = why;
  }
  return first_failure;
}

absl::Status NodeLedger::ReportChecks(const std::string& node_id, const std::string& job_id,
                                      int64_t generation,
                                      const std::vector<v1::HealthCheckResult>& checks) {
  if (absl::Status valid = ValidateChecks(node_id, checks); !valid.ok()) return valid;
  if (checks.empty()) return absl::OkStatus();
  {
    absl::MutexLock lock(&mu_);
    v1::Node* node = FindOrAddLocked(node_id);
    if (node == nullptr) {
      return LedgerFull(options_.max_nodes, node_id);
    }
    node->set_last_seen_unix_ms(absl::ToUnixMillis(clock_.Now()));
    MarkDirtyLocked(node_id);
    RecordChecksLocked(*node, job_id, generation, checks);
  }
  NotifyChange();
  return absl::OkStatus();
}

absl::Status NodeLedger::Admit(const std::string& node_id, const std::string& address,
                               const std::string& job_id,
                               const std::vector<v1::HealthCheckResult>& checks, bool resuming) {
  if (absl::Status valid = ValidateChecks(node_id, checks); !valid.ok()) return valid;
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    v1::Node* node = FindOrAddLocked(node_id);
    if (node == nullptr) {
      return LedgerFull(options_.max_nodes, node_id);
    }
    const int64_t now_ms = absl::ToUnixMillis(clock_.Now());
    node->set_address(address.substr(0, options_.max_reason_bytes));
    node->set_last_job_id(job_id);
    node->set_last_seen_unix_ms(now_ms);
    MarkDirtyLocked(node_id);
    const std::string why = RecordChecksLocked(*node, job_id, /*generation=*/0, checks);
    if (!why.empty()) {
      refused = absl::FailedPreconditionError(absl::StrCat(
          "node ", Quoted(node_id), " does not join job ", Quoted(job_id), ": its ", why,
          " (the output is stored with the node: ddpctl nodes get ", node_id, ")"));
    }
    if (refused.ok() && !resuming && node->state() != v1::NODE_READY) {
      refused = absl::FailedPreconditionError(
          absl::StrCat("node ", Quoted(node_id), " is ", NodeStateName(node->state()),
                       " and joins no job: ", node->state_reason(),
                       "; an operator lets it in again with: ddpctl nodes uncordon ", node_id));
    }
  }
  NotifyChange();
  return refused;
}

void NodeLedger::PruneEarliestLocked(absl::Time now) {
  const int64_t horizon = absl::ToUnixMillis(now - policy_.window);
  for (auto it = earliest_.begin(); it != earliest_.end();) {
    it = it->second.second < horizon ? earliest_.erase(it) : std::next(it);
  }
}

void NodeLedger::AddWorkerIncidentLocked(const rendezvous::JobEvent& event) {
  const rendezvous::FailureInfo& failure = event.failure();
  v1::Node* node = FindOrAddLocked(failure.node_id());
  if (node == nullptr) return;  // over max_nodes: not recorded
  const int64_t time_ms =
      failure.time_unix_ms() == 0 ? event.time_unix_ms() : failure.time_unix_ms();
  v1::NodeIncident incident;
  incident.set_kind(failure.hang() ? v1::NODE_INCIDENT_HANG : v1::NODE_INCIDENT_WORKER_FAILED);
  incident.set_job_id(event.job_id());
  incident.set_generation(failure.generation());
  incident.set_time_unix_ms(time_ms);
  incident.set_cause(
      absl::StrCat("rank ", failure.global_rank(), " ", rendezvous::DescribeFailure(failure)));
  // Counted when it is the earliest failure of its generation so far.
  const std::pair<std::string, int64_t> key{event.job_id(), failure.generation()};
  auto earliest = earliest_.find(key);
  if (earliest == earliest_.end() || time_ms < earliest->second.second) {
    if (earliest != earliest_.end() && earliest->second.first != failure.node_id()) {
      // Uncount the later one: it was a knock-on of this failure.
      auto other = nodes_.find(earliest->second.first);
      if (other != nodes_.end()) {
        for (v1::NodeIncident& old : *other->second.mutable_incidents()) {
          if (old.counted() && old.job_id() == key.first && old.generation() == key.second &&
              old.kind() != v1::NODE_INCIDENT_CHECK_FAILED &&
              old.kind() != v1::NODE_INCIDENT_LEASE_LOST) {
            old.set_counted(false);
          }
        }
        MarkDirtyLocked(other->first);
      }
    }
    const bool same_node_counted =
        earliest != earliest_.end() && earliest->second.first == failure.node_id();
    if (same_node_counted) {
      // One count per node and generation: the earlier incident takes it.
      for (v1::NodeIncident& old : *node->mutable_incidents()) {
        if (old.job_id() == key.first && old.generation() == key.second &&
            (old.kind() == v1::NODE_INCIDENT_WORKER_FAILED ||
             old.kind() == v1::NODE_INCIDENT_HANG)) {
          old.set_counted(false);
        }
      }
    }
    earliest_[key] = {failure.node_id(), time_ms};
    incident.set_counted(true);
  }
  AddIncidentLocked(*node, std::move(incident));
}

void NodeLedger::RecordEvents(const std::vector<rendezvous::JobEvent>& events) {
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    for (const rendezvous::JobEvent& event : events) {
      if (event.type() == rendezvous::JobEvent::WORKER_FAILED && event.has_failure() &&
          event.failure().local_rank() >= 0 && !event.failure().node_id().empty()) {
        AddWorkerIncidentLocked(event);
        changed = true;
      } else if (event.type() == rendezvous::JobEvent::NODE_LOST && !event.node_id().empty() &&
                 IsLostLease(event)) {
        v1::Node* node = FindOrAddLocked(event.node_id());
        if (node == nullptr) continue;
        v1::NodeIncident incident;
        incident.set_kind(v1::NODE_INCIDENT_LEASE_LOST);
        incident.set_job_id(event.job_id());
        incident.set_generation(event.generation());
        incident.set_time_unix_ms(event.time_unix_ms());
        incident.set_cause(event.message());
        incident.set_counted(true);
        AddIncidentLocked(*node, std::move(incident));
        changed = true;
      }
    }
    if (changed) PruneEarliestLocked(clock_.Now());
  }
  if (changed) NotifyChange();
}

absl::StatusOr<v1::Node> NodeLedger::Cordon(const std::string& node_id, const std::string& reason) {
  if (node_id.empty() || static_cast<int>(node_id.size()) > options_.max_id_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("node id of ", node_id.size(), " bytes; give 1 to ", options_.max_id_bytes));
  }
  if (static_cast<int>(reason.size()) > options_.max_reason_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("cordon reason of ", reason.size(),
                                                   " bytes; at most ", options_.max_reason_bytes));
  }
  v1::Node copy;
  {
    absl::MutexLock lock(&mu_);
    v1::Node* node = FindOrAddLocked(node_id);
    if (node == nullptr) {
      return LedgerFull(options_.max_nodes, node_id);
    }
    const std::string why = reason.empty() ? "cordoned by an operator"
                                           : absl::StrCat("cordoned by an operator: ", reason);
    if (node->state() != v1::NODE_CORDONED || node->state_reason() != why) {
      SetStateLocked(*node, v1::NODE_CORDONED, why);
    }
    copy = *node;
  }
  NotifyChange();
  return copy;
}

absl::StatusOr<v1::Node> NodeLedger::Uncordon(const std::string& node_id) {
  v1::Node copy;
  {
    absl::MutexLock lock(&mu_);
    auto it = nodes_.find(node_id);
    if (it == nodes_.end()) {
      return absl::NotFoundError(
          absl::StrCat("node ", Quoted(node_id), " is unknown to this coordinator"));
    }
    if (it->second.state() != v1::NODE_READY) {
      SetStateLocked(it->second, v1::NODE_READY, "");
      // A fresh start: what happened before no longer counts.
      for (v1::NodeIncident& incident : *it->second.mutable_incidents()) {
        incident.set_counted(false);
      }
    }
    copy = it->second;
  }
  NotifyChange();
  return copy;
}

absl::StatusOr<v1::Node> NodeLedger::Get(const std::string& node_id) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) {
    return absl::NotFoundError(
        absl::StrCat("node ", Quoted(node_id), " is unknown to this coordinator"));
  }
  return it->second;
}

std::vector<v1::Node> NodeLedger::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Node> out;
  out.reserve(nodes_.size());
  for (const auto& [id, node] : nodes_) out.push_back(node);
  return out;
}

std::map<v1::NodeState, int64_t> NodeLedger::CountByState() const {
  std::map<v1::NodeState, int64_t> counts = {
      {v1::NODE_READY, 0}, {v1::NODE_CORDONED, 0}, {v1::NODE_QUARANTINED, 0}};
  absl::MutexLock lock(&mu_);
  for (const auto& [id, node] : nodes_) ++counts[node.state()];
  return counts;
}

std::vector<v1::Node> NodeLedger::TakeDirty() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Node> out;
  out.reserve(dirty_.size());
  for (const std::string& id : dirty_) {
    auto it = nodes_.find(id);
    if (it != nodes_.end()) out.push_back(it->second);
  }
  dirty_.clear();
  return out;
}

void NodeLedger::MarkDirty(const std::vector<std::string>& node_ids) {
  absl::MutexLock lock(&mu_);
  for (const std::string& id : node_ids) MarkDirtyLocked(id);
}

}  // namespace ddp::fleet
