#include "coordinator/rendezvous/job_types.h"

#include <string.h>

#include "absl/strings/str_cat.h"

namespace ddp::rendezvous {

bool FailedEarlier(const FailureInfo& a, const FailureInfo& b) {
  // A stopped process stalls its peers, never the other way round.
  if (a.process_stopped != b.process_stopped) return a.process_stopped;
  if (a.time != b.time) return a.time < b.time;
  return a.global_rank < b.global_rank;
}

std::string DescribeFailure(const FailureInfo& f) {
  if (f.local_rank < 0) return f.message;
  if (f.hang && f.process_stopped) return "hang (no heartbeat; the process was stopped)";
  if (f.hang) return "hang (no heartbeat)";
  if (f.signal != 0) {
    const char* abbrev = sigabbrev_np(f.signal);
    return abbrev != nullptr ? absl::StrCat("signal ", f.signal, " (SIG", abbrev, ")")
                             : absl::StrCat("signal ", f.signal);
  }
  return absl::StrCat("exit code ", f.exit_code);
}

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kWaiting:
      return "waiting";
    case JobState::kStarting:
      return "starting";
    case JobState::kRunning:
      return "running";
    case JobState::kRestarting:
      return "restarting";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

const char* RestartCauseName(RestartCause cause) {
  switch (cause) {
    case RestartCause::kWorkerFailure:
      return "worker_failure";
    case RestartCause::kHang:
      return "hang";
    case RestartCause::kNodeLoss:
      return "node_loss";
    case RestartCause::kScale:
      return "scale";
    case RestartCause::kOperator:
      return "operator";
    case RestartCause::kDrain:
      return "drain";
    case RestartCause::kNone:
      break;
  }
  return "";
}

const char* JobEventTypeName(JobEventType type) {
  switch (type) {
    case JobEventType::kJobCreated:
      return "job_created";
    case JobEventType::kNodeJoined:
      return "node_joined";
    case JobEventType::kNodeLost:
      return "node_lost";
    case JobEventType::kGenerationOpened:
      return "generation_opened";
    case JobEventType::kWorkerFailed:
      return "worker_failed";
    case JobEventType::kRestarting:
      return "restarting";
    case JobEventType::kJobFinished:
      return "job_finished";
    case JobEventType::kJobUpdated:
      return "job_updated";
    case JobEventType::kNodeDraining:
      return "node_draining";
  }
  return "unknown";
}

}  // namespace ddp::rendezvous
