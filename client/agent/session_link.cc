#include "client/agent/session_link.h"

namespace ddp::client {

v1::NodeHeader* MutableHeader(v1::AgentMessage* message) {
  switch (message->body_case()) {
    case v1::AgentMessage::kHeartbeat:
      return message->mutable_heartbeat()->mutable_header();
    case v1::AgentMessage::kWorkerExited:
      return message->mutable_worker_exited()->mutable_header();
    case v1::AgentMessage::kWorkersStopped:
      return message->mutable_workers_stopped()->mutable_header();
    case v1::AgentMessage::kMasterInfo:
      return message->mutable_master_info()->mutable_header();
    case v1::AgentMessage::kLeave:
      return message->mutable_leave()->mutable_header();
    case v1::AgentMessage::kStacks:
      return message->mutable_stacks()->mutable_header();
    case v1::AgentMessage::kPreempted:
      return message->mutable_preempted()->mutable_header();
    case v1::AgentMessage::kReadyToLeave:
      return message->mutable_ready_to_leave()->mutable_header();
    default:
      return nullptr;  // Register carries its identity in its own fields
  }
}

}  // namespace ddp::client
