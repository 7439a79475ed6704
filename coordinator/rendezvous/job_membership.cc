// Job: registration, resume, incarnation replacement, heartbeats, stream
// closes, leaves and node removal.

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/rendezvous/job.h"

namespace ddp::rendezvous {

absl::Status Job::ValidateRegister(const RegisterRequest& request) const {
  absl::Status status = ValidateId(request.node_id, "node id", limits_);
  if (!status.ok()) return status;
  if (request.incarnation == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", request.node_id,
                     "' registered with incarnation 0; use a fresh non-zero "
                     "random number per agent start"));
  }
  if (request.nproc < 0 || request.nproc > limits_.max_nproc_per_node) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node '", request.node_id, "' asks for nproc=", request.nproc, "; it must be in [1, ",
        limits_.max_nproc_per_node, "] (0 = the job's nproc_per_node)"));
  }
  if (request.requested_rank < -1 || request.requested_rank >= settings_.max_nodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", request.node_id, "' requests group rank ", request.requested_rank,
                     "; job '", id_, "' has at most ", settings_.max_nodes, " nodes (ranks 0..",
                     settings_.max_nodes - 1, ", -1 = none)"));
  }
  if (static_cast<int>(request.address.size()) > limits_.max_address_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", Capped(request.address), "' of node '", request.node_id,
                     "' is longer than ", limits_.max_address_length, " bytes"));
  }
  if (request.role.size() > 64) {
    return absl::InvalidArgumentError(absl::StrCat("role '", Capped(request.role), "' of node '",
                                                   request.node_id, "' is longer than 64 bytes"));
  }
  if (membership_.IsExcluded(request.node_id)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node '", request.node_id, "' was excluded from job '", id_, "'; it cannot rejoin"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RegisterResult> Job::Register(const RegisterRequest& request) {
  absl::Status status = ValidateRegister(request);
  if (!status.ok()) return status;
  if (request.settings) {
    status = CheckCompatibleSettings(id_, settings_, request.node_id, *request.settings);
    if (!status.ok()) {
      NoticeConflict(status);
      return status;
    }
  }
  const int nproc = request.nproc > 0 ? request.nproc : settings_.nproc_per_node;
  Node* node = membership_.Find(request.node_id);
  if (node != nullptr && node->record.incarnation == request.incarnation) {
    if (node->record.nproc != nproc || node->record.requested_rank != request.requested_rank) {
      return absl::FailedPreconditionError(
          absl::StrCat("node '", request.node_id, "' resumed incarnation ", request.incarnation,
                       " with nproc=", nproc, " rank request ", request.requested_rank,
                       " but registered with nproc=", node->record.nproc, " rank request ",
                       node->record.requested_rank,
                       "; an agent that changes its flags must use a new incarnation"));
    }
    return Resume(*node, request);
  }
  if (IsTerminal(state_)) {
    return absl::FailedPreconditionError(absl::StrCat("job '", id_, "' already finished (",
                                                      JobStateName(state_), "); use a new job id"));
  }
  if (node != nullptr && membership_.Alive(*node)) {
    // The registered agent is alive (its stream is open and it heartbeats):
    // this is a second agent with the same node id, not a restart. Replacing
    // the live one would make the two fence each other forever.
    return absl::AlreadyExistsError(absl::StrCat(
        "node id '", request.node_id, "' of job '", id_,
        "' is already used by a live agent (incarnation ", node->record.incarnation, " at ",
        node->record.address,
        ", heartbeating); two agents cannot share a node id (the default is the hostname: "
        "two agents on one host, or containers sharing a hostname): give each its own "
        "--node-id"));
  }
  if (node != nullptr) {
    ReplaceIncarnation(*node, request);
  } else {
    int limit = settings_.max_nodes + limits_.max_spare_nodes;
    if (membership_.size() >= limit) {
      return absl::ResourceExhaustedError(
          absl::StrCat("job '", id_, "' already has ", membership_.size(),
                       " registered nodes, the limit (max_nodes + spares) is ", limit, "; node '",
                       request.node_id, "' cannot join"));
    }
    AddNode(request, nproc);
  }
  node = membership_.Find(request.node_id);
  RegisterResult result;
  result.settings = settings_;
  result.state = state_;
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
  next_conflict_notice_ = now + settings_.heartbeat_interval;
  for (const auto& [id, node] : membership_.nodes()) {
    Send(node, Notice{absl::StrCat("a node was refused: ", refusal.message())});
  }
}

absl::StatusOr<RegisterResult> Job::Resume(Node& node, const RegisterRequest& request) {
  membership_.Resume(node, request);
  if (request.lease_expired) HandleLeaseExpired(node, request);
  ResendPending(node);
  RegisterResult result;
  result.settings = settings_;
  result.state = state_;
  result.generation = round_.generation();
  result.role = IsMember(node) ? NodeRole::kMember : NodeRole::kWaiting;
  result.resumed = true;
  return result;
}

void Job::HandleLeaseExpired(Node& node, const RegisterRequest& request) {
  if (!IsMember(node) || request.generation != round_.generation() || node.succeeded) return;
  const std::string& node_id = node.record.node_id;
  if (state_ == JobState::kRunning) {
    Decide(Disruption::MembershipChange(
        RestartCause::kNodeLoss,
        absl::StrCat("node '", node_id, "' was cut off from the coordinator for longer ",
                     "than its lease (", absl::FormatDuration(LeaseFor(settings_).lease),
                     ") and stopped its workers of generation ", round_.generation(),
                     "; a membership change: the restart budget is not charged")));
  } else if (state_ == JobState::kRestarting && stop_barrier_.Confirm(node_id)) {
    MaybeFinishStopBarrier();  // its workers are stopped: as WorkersStopped
  }
}

void Job::ResendPending(const Node& node) {
  const bool member = IsMember(node);
  if (IsTerminal(state_)) {
    Send(node, JobFinished{state_, restart_policy_.root_cause(), finish_message_});
  } else if (state_ == JobState::kStarting && member && node.record.group_rank == 0) {
    Send(node, RequestMasterInfo{round_.generation()});
  } else if (state_ == JobState::kRunning && member) {
    Send(node, round_.AssignmentFor(node.record, restart_policy_.restart_count(),
                                    restart_policy_.max_restarts()));
  } else if (state_ == JobState::kRestarting && stop_barrier_.Awaits(node.record.node_id)) {
    Send(node, StopWorkers{round_.generation(), "resent after the session resumed"});
  }
}

void Job::AddNode(const RegisterRequest& request, int nproc) {
  membership_.Add(request, nproc);
  counters_dirty_ = true;  // next_join_seq
  Emit(JobEventType::kNodeJoined, request.node_id,
       absl::StrCat("nproc ", nproc, ", incarnation ", request.incarnation));
  switch (state_) {
    case JobState::kWaiting:
      MaybeCloseRendezvous();
      break;
    case JobState::kStarting:
      // No worker started yet: reform at once with the newcomer.
      if (round_.members().live < settings_.max_nodes) OpenRendezvous(true);
      break;
    case JobState::kRunning:
      if (round_.members().live < settings_.max_nodes) {
        Decide(Disruption::MembershipChange(
            RestartCause::kScale,
            absl::StrCat("node '", request.node_id, "' joined below max_nodes")));
      }
      break;
    default:  // kRestarting: it is a candidate of the next rendezvous.
      break;
  }
}

void Job::ReplaceIncarnation(Node& node, const RegisterRequest& request) {
  const Incarnation old_incarnation = node.record.incarnation;
  const bool member = IsMember(node);
  // The old agent's stream had closed: it died (or was cut off) and this is
  // its replacement, a membership change rather than a worker failure.
  const bool old_session_lost = node.stream_closed_at.has_value();
  // The old agent may be alive but cut off, its workers running until its
  // lease runs out.
  FenceWorkersOf(node);
  const int nproc = request.nproc > 0 ? request.nproc : settings_.nproc_per_node;
  const bool nproc_changed = node.record.nproc != nproc;
  membership_.Replace(node, request, nproc);
  const std::string node_id = node.record.node_id;
  Emit(JobEventType::kNodeJoined, node_id,
       absl::StrCat("incarnation ", request.incarnation, " replaced ", old_incarnation,
                    " (agent restarted); the old one is "
                    "fenced"));
  if (!member) return;
  switch (state_) {
    case JobState::kStarting:
      if (nproc_changed) {
        OpenRendezvous(true);
      } else if (node.record.group_rank == 0) {
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
      if (stop_barrier_.Awaits(node.record.node_id)) {
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
  return state_ == JobState::kRunning && IsMember(*node) ? round_.generation() : 0;
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
  RemoveNode(ref.node_id, "left the job", RestartCause::kNodeLoss, /*workers_stopped=*/true);
  return absl::OkStatus();
}

void Job::FenceWorkersOf(const Node& node) {
  const bool may_run =
      IsMember(node) && !node.succeeded &&
      (state_ == JobState::kRunning ||
       (state_ == JobState::kRestarting && stop_barrier_.Awaits(node.record.node_id)));
  if (!may_run) return;
  stop_barrier_.FenceUntil(node.last_heartbeat + settings_.heartbeat_timeout);
}

void Job::RemoveNode(std::string node_id, const std::string& reason, RestartCause cause,
                     bool workers_stopped) {
  const Node* node = membership_.Find(node_id);
  if (node == nullptr) return;
  if (!workers_stopped) FenceWorkersOf(*node);
  const bool member = IsMember(*node);
  const bool stop_pending = stop_barrier_.Confirm(node_id);  // it is gone either way
  const bool succeeded = node->succeeded;
  if (member) {
    round_.mutable_members().Remove(node->record.group_rank);
  }
  membership_.Remove(node_id);
  Emit(JobEventType::kNodeLost, node_id, reason);
  switch (state_) {
    case JobState::kWaiting:
      if (membership_.size() < settings_.min_nodes) {
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

}  // namespace ddp::rendezvous
