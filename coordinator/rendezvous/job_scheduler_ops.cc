// Job: scheduler operations (UpdateJob, CancelJob, ExcludeNode).

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/rendezvous/job.h"

namespace ddp::rendezvous {

absl::Status Job::Update(int min_nodes, int max_nodes) {
  if (IsTerminal(state_)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", id_, "' already finished (", JobStateName(state_), "); it cannot be resized"));
  }
  JobSettings updated = settings_;
  updated.min_nodes = min_nodes;
  updated.max_nodes = max_nodes;
  DDP_RETURN_IF_ERROR(ValidateJobSettings(updated, limits_));
  const JobSettings old = settings_;
  settings_ = updated;
  MarkJobDirty();
  Emit(
      JobEventType::kJobUpdated, "",
      absl::StrCat("nodes ", old.min_nodes, ":", old.max_nodes, " -> ", min_nodes, ":", max_nodes));
  const int registered = membership_.size();
  // Membership must change when members exceed the new max, or when spares can
  // now fill places below it.
  const bool membership_changes =
      round_.members().live > max_nodes ||
      (round_.members().live < max_nodes && registered > round_.members().live);
  switch (state_) {
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
            RestartCause::kScale,
            absl::StrCat("job resized to ", min_nodes, ":", max_nodes, " nodes")));
      }
      break;
    default:  // kRestarting: the next rendezvous uses the new sizes.
      break;
  }
  return absl::OkStatus();
}

absl::Status Job::Cancel(const std::string& reason) {
  if (IsTerminal(state_)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", id_, "' already finished (", JobStateName(state_), ")"));
  }
  Finish(JobState::kCancelled, std::nullopt,
         absl::StrCat("cancelled: ", reason.substr(0, limits_.max_message_length)));
  return absl::OkStatus();
}

absl::Status Job::ExcludeNode(const std::string& node_id, const std::string& reason) {
  DDP_RETURN_IF_ERROR(ValidateId(node_id, "node id", limits_));
  if (IsTerminal(state_)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", id_, "' already finished (", JobStateName(state_), ")"));
  }
  DDP_ASSIGN_OR_RETURN(const bool newly_excluded, membership_.Exclude(node_id));
  if (!newly_excluded) return absl::OkStatus();
  MarkJobDirty();
  const std::string why =
      absl::StrCat("excluded by the scheduler: ", reason.substr(0, limits_.max_message_length));
  Node* node = membership_.Find(node_id);
  if (node != nullptr) {
    Send(*node, NodeDismissed{why});
    RemoveNode(node_id, why, RestartCause::kOperator);
  }
  return absl::OkStatus();
}

}  // namespace ddp::rendezvous
