// Job: opening and closing rendezvous rounds, master info and assignments,
// worker exits, the restart stop barrier, failures and the end of the job.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/rendezvous/job.h"
#include "coordinator/rendezvous/rank_table.h"

namespace ddp::rendezvous {

void Job::OpenRendezvous(bool after_restart) {
  const absl::Time now = clock_->Now();
  state_ = JobState::kWaiting;
  round_.Open(now + settings_.join_timeout);
  stop_barrier_.Close();
  MarkJobDirty();
  // After a restart that kept min_nodes, the new generation forms at once (no
  // last call): the nodes are all there and waiting would only delay training.
  if (after_restart && membership_.size() >= settings_.min_nodes) {
    CloseRendezvous();
    return;
  }
  MaybeCloseRendezvous();
}

void Job::MaybeCloseRendezvous() {
  if (state_ != JobState::kWaiting) return;
  if (round_.ReadyToClose(membership_.size(), settings_, clock_->Now())) CloseRendezvous();
}

void Job::CloseRendezvous() {
  std::vector<Node*> candidates = membership_.CandidatesInOrder();
  const size_t n = std::min(candidates.size(), static_cast<size_t>(settings_.max_nodes));
  std::vector<RankMember> rank_members(n);
  for (size_t i = 0; i < n; ++i) {
    const NodeRecord& r = candidates[i]->record;
    rank_members[i] = RankMember{r.node_id, r.nproc, r.requested_rank, r.group_rank};
  }
  absl::StatusOr<RankTable> table =
      round_.Close(rank_members, clock_->Now() + settings_.shutdown_timeout);
  if (!table.ok()) {  // Inputs are validated on entry; this is a bug.
    FailureInfo failure;
    failure.message =
        absl::StrCat("internal error computing the rank table: ", table.status().message());
    failure.time = clock_->Now();
    Finish(JobState::kFailed, failure, failure.message);
    return;
  }
  for (const std::string& node_id : table->ignored_requests) {
    DDP_LOG(WARNING) << "job " << id_ << ": rank request of node " << node_id
                     << " is out of range or contested; ignored";
  }
  for (const RankEntry& e : table->entries) {
    Node& node = *membership_.Find(e.node_id);
    if (node.record.group_rank != e.group_rank ||
        node.record.global_rank_offset != e.global_rank_offset) {
      node.record.group_rank = e.group_rank;
      node.record.global_rank_offset = e.global_rank_offset;
      membership_.MarkDirty(e.node_id);
    }
  }
  for (size_t i = n; i < candidates.size(); ++i) {  // hot spares
    Node* spare = candidates[i];
    if (spare->record.group_rank != -1) {
      spare->record.group_rank = -1;
      membership_.MarkDirty(spare->record.node_id);
    }
  }
  for (auto& [id, node] : membership_.mutable_nodes()) {
    node.succeeded = false;
    node.exited_ok = 0;
    node.exited.clear();
  }
  state_ = JobState::kStarting;
  MarkJobDirty();
  Send(*membership_.Find(round_.members().by_rank[0]), RequestMasterInfo{round_.generation()});
}

absl::Status Job::ReportMasterInfo(const NodeRef& ref, const MasterInfo& info) {
  DDP_ASSIGN_OR_RETURN(Node * node,
                       membership_.Fence(ref, round_.generation(), /*exact_generation=*/true));
  if (!IsMember(*node) || node->record.group_rank != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", ref.node_id, "' is not group rank 0 of generation ",
                     round_.generation(), " of job '", id_, "'; only rank 0 supplies master info"));
  }
  if (info.master_port < 1 || info.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("master port ", info.master_port, " is outside [1, 65535]"));
  }
  // Empty: NCCL is not installed on the rank-0 node; workers get no id.
  if (!info.nccl_unique_id.empty() && info.nccl_unique_id.size() != kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL unique id is ", info.nccl_unique_id.size(), " bytes; it must be ",
                     kNcclUniqueIdBytes, " (ncclUniqueId) or empty (no NCCL on the node)"));
  }
  if (static_cast<int>(info.master_addr.size()) > limits_.max_address_length) {
    return absl::InvalidArgumentError(absl::StrCat("master address '", Capped(info.master_addr),
                                                   "' is longer than ", limits_.max_address_length,
                                                   " bytes"));
  }
  MasterInfo effective = info;
  if (effective.master_addr.empty()) effective.master_addr = node->record.address;
  if (effective.master_addr.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", ref.node_id, "' gave no master address and registered none"));
  }
  if (state_ == JobState::kRunning) return absl::OkStatus();  // duplicate
  if (state_ != JobState::kStarting) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", id_, "' is ", JobStateName(state_), ", not waiting for master info"));
  }
  PushAssignments(std::move(effective));
  return absl::OkStatus();
}

void Job::PushAssignments(MasterInfo master) {
  std::vector<MemberRole> roles;
  for (const std::string& node_id : round_.members().by_rank) {
    if (node_id.empty()) continue;
    const Node& node = *membership_.Find(node_id);
    roles.push_back(MemberRole{node_id, node.role, node.record.nproc});
  }
  round_.Start(std::move(master), roles);
  state_ = JobState::kRunning;
  MarkJobDirty();
  for (const std::string& node_id : round_.members().by_rank) {
    if (!node_id.empty()) ResendPending(*membership_.Find(node_id));
  }
  Emit(JobEventType::kGenerationOpened, round_.members().by_rank[0],
       absl::StrCat("generation ", round_.generation(), ": ", round_.members().live,
                    " nodes, world size ", round_.members().world_size, ", restart ",
                    restart_policy_.restart_count(), " of ", restart_policy_.max_restarts()));
}

absl::Status Job::WorkerExited(const NodeRef& ref, const WorkerExit& exit) {
  DDP_ASSIGN_OR_RETURN(Node * node,
                       membership_.Fence(ref, round_.generation(), /*exact_generation=*/true));
  if (exit.local_rank < 0 || exit.local_rank >= node->record.nproc) {
    return absl::InvalidArgumentError(absl::StrCat("local rank ", exit.local_rank, " of node '",
                                                   ref.node_id, "' is outside [0, ",
                                                   node->record.nproc, ")"));
  }
  if (IsTerminal(state_)) return absl::OkStatus();
  if (round_.generation() == 0 || state_ == JobState::kStarting ||
      (state_ == JobState::kRunning && !IsMember(*node))) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", ref.node_id, "' runs no workers of generation ", round_.generation(),
                     " of job '", id_, "' (", JobStateName(state_), ")"));
  }
  // One report per worker and generation counts: a resumed agent repeats its
  // reports, and a hung worker that exits later was already reported.
  if (node->exited.empty()) node->exited.assign(node->record.nproc, false);
  if (node->exited[exit.local_rank]) return absl::OkStatus();
  if (exit.ok()) {
    if (state_ != JobState::kRunning) return absl::OkStatus();
    node->exited[exit.local_rank] = true;
    if (++node->exited_ok == node->record.nproc && !node->succeeded) {
      node->succeeded = true;
      if (++round_.mutable_members().succeeded ==
          static_cast<int>(round_.members().by_rank.size())) {
        Finish(JobState::kSucceeded, std::nullopt,
               absl::StrCat("every worker of generation ", round_.generation(), " exited 0"));
      }
    }
    return absl::OkStatus();
  }
  node->exited[exit.local_rank] = true;
  FailureInfo failure;
  failure.node_id = ref.node_id;
  failure.generation = round_.generation();
  failure.local_rank = exit.local_rank;
  failure.global_rank = node->record.global_rank_offset + exit.local_rank;
  failure.exit_code = exit.exit_code;
  failure.signal = exit.signal;
  failure.hang = exit.hang;
  failure.process_stopped = exit.hang && exit.process_stopped;
  failure.pid = exit.pid;
  failure.message = exit.error_message.substr(0, static_cast<size_t>(limits_.max_message_length));
  // An agent that sent no time: the moment the report arrived.
  failure.time = exit.time == absl::UnixEpoch() ? clock_->Now() : exit.time;
  Decide(Disruption::WorkerFailure(std::move(failure)),
         state_ == JobState::kRunning ? LostPeerOf(ref.node_id) : std::nullopt);
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
  context.state = state_;
  context.generation = round_.generation();
  context.now = clock_->Now();
  context.lost_peer = std::move(lost_peer);
  Apply(restart_policy_.Decide(disruption, context));
}

void Job::Apply(const RestartDecision& decision) {
  for (const FailureInfo& failure : decision.recorded) {
    MarkJobDirty();
    Emit(JobEventType::kWorkerFailed, failure.node_id, failure.message, failure);
  }
  switch (decision.action) {
    case RestartDecision::Action::kIgnore:
      break;
    case RestartDecision::Action::kRestart:
      EmitRestarting(decision.cause, decision.reason, clock_->Now());
      StopAllWorkers(decision.reason);
      break;
    case RestartDecision::Action::kReviewHang:
    case RestartDecision::Action::kStopThenFail:
      StopAllWorkers(decision.reason);
      break;
  }
}

void Job::EmitRestarting(RestartCause cause, const std::string& reason, absl::Time began) {
  JobEvent event = NewEvent(JobEventType::kRestarting, "", reason);
  event.restart_cause = cause;
  event.time = began;
  Publish(std::move(event));
}

void Job::StopAllWorkers(const std::string& reason) {
  state_ = JobState::kRestarting;
  round_.StopAwaitingMaster();
  stop_barrier_.Open(round_.members().by_rank, clock_->Now() + settings_.shutdown_timeout);
  MarkJobDirty();
  for (const std::string& node_id : stop_barrier_.Awaited()) {
    Send(*membership_.Find(node_id), StopWorkers{round_.generation(), reason});
  }
  MaybeFinishStopBarrier();
}

absl::Status Job::WorkersStopped(const NodeRef& ref) {
  DDP_RETURN_IF_ERROR(
      membership_.Fence(ref, round_.generation(), /*exact_generation=*/true).status());
  if (state_ == JobState::kRunning || state_ == JobState::kStarting) {
    return absl::FailedPreconditionError(absl::StrCat("no stop of generation ", round_.generation(),
                                                      " was requested from node '", ref.node_id,
                                                      "'"));
  }
  if (state_ == JobState::kRestarting && stop_barrier_.Confirm(ref.node_id)) {
    MaybeFinishStopBarrier();
  }
  return absl::OkStatus();  // duplicates and late confirmations are harmless
}

void Job::MaybeFinishStopBarrier() {
  if (state_ != JobState::kRestarting || !stop_barrier_.complete()) return;
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
  state_ = state;
  restart_policy_.Finish(std::move(root_cause));
  finish_message_ = message;
  finished_ = clock_->Now();
  round_.Finish();
  stop_barrier_.Close();
  MarkJobDirty();
  for (const auto& [id, node] : membership_.nodes()) {
    Send(node, JobFinished{state_, restart_policy_.root_cause(), finish_message_});
  }
  Emit(JobEventType::kJobFinished, "", absl::StrCat(JobStateName(state_), ": ", message),
       restart_policy_.root_cause());
}

}  // namespace ddp::rendezvous
