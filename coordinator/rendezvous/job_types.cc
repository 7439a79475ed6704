#include "coordinator/rendezvous/job_types.h"

namespace ddp::rendezvous {

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
  }
  return "unknown";
}

}  // namespace ddp::rendezvous
