#include "tools/rdzv_sim/sim_agent.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp::rdzv_sim {

absl::string_view PhaseName(SimAgentPhase phase) {
  switch (phase) {
    case SimAgentPhase::kConnecting:
      return "connecting";
    case SimAgentPhase::kWaiting:
      return "waiting";
    case SimAgentPhase::kRunning:
      return "running";
    case SimAgentPhase::kStopping:
      return "stopping";
    case SimAgentPhase::kFinished:
      return "finished";
    case SimAgentPhase::kFailed:
      return "failed";
  }
  return "unknown";
}

SimAgent::SimAgent(SimAgentIdentity identity)
    : identity_(std::move(identity)), random_(identity_.incarnation) {}

absl::Status SimAgent::Unexpected(absl::string_view order) const {
  return absl::FailedPreconditionError(
      absl::StrCat("node '", identity_.node_id, "' got ", order, " while ", PhaseName(phase_),
                   "; the coordinator broke the session protocol"));
}

void SimAgent::OnRegisterSent(absl::Time now) { register_sent_ = now; }

absl::StatusOr<absl::Duration> SimAgent::OnRegistered(absl::Time now) {
  if (phase_ != SimAgentPhase::kConnecting) return Unexpected("Registered");
  phase_ = SimAgentPhase::kWaiting;
  return now - register_sent_;
}

absl::StatusOr<MasterInfoReply> SimAgent::OnRequestMasterInfo(int64_t generation) {
  if (!ShouldHeartbeat()) return Unexpected("RequestMasterInfo");
  MasterInfoReply reply;
  reply.header = Header();
  reply.header.generation = generation;
  reply.master_port = identity_.master_port_base + static_cast<int>(generation % 1000);
  reply.nccl_unique_id.resize(kNcclUniqueIdBytes);
  for (char& c : reply.nccl_unique_id) c = static_cast<char>(random_());
  return reply;
}

absl::StatusOr<AssignmentEvent> SimAgent::OnAssignment(int64_t generation, int group_rank,
                                                       absl::Time now) {
  if (!ShouldHeartbeat()) return Unexpected("Assignment");
  if (generation < generation_) {
    return absl::AbortedError(absl::StrCat("node '", identity_.node_id,
                                           "' got an assignment of generation ", generation,
                                           " after generation ", generation_));
  }
  AssignmentEvent event;
  event.generation = generation;
  event.received = now;
  event.duplicate = generation == generation_;
  if (!event.duplicate) ++assignments_;
  event.ordinal = assignments_;
  generation_ = generation;
  group_rank_ = group_rank;
  phase_ = SimAgentPhase::kRunning;
  return event;
}

absl::StatusOr<NodeHeaderFields> SimAgent::OnStopWorkers(int64_t generation) {
  if (!ShouldHeartbeat()) return Unexpected("StopWorkers");
  phase_ = SimAgentPhase::kStopping;
  NodeHeaderFields header = Header();
  header.generation = generation;
  return header;
}

void SimAgent::OnFinished() { phase_ = SimAgentPhase::kFinished; }

void SimAgent::OnStreamFailed() {
  if (phase_ != SimAgentPhase::kFinished) phase_ = SimAgentPhase::kFailed;
}

bool SimAgent::ShouldHeartbeat() const {
  return phase_ == SimAgentPhase::kWaiting || phase_ == SimAgentPhase::kRunning ||
         phase_ == SimAgentPhase::kStopping;
}

NodeHeaderFields SimAgent::Header() const {
  return NodeHeaderFields{identity_.job_id, identity_.node_id, identity_.incarnation, generation_};
}

absl::StatusOr<NodeHeaderFields> SimAgent::WorkerExitHeader() const {
  if (phase_ != SimAgentPhase::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", identity_.node_id, "' is ", PhaseName(phase_),
                     ", not running: it has no workers that could exit"));
  }
  return Header();
}

}  // namespace ddp::rdzv_sim
