#ifndef DDP_CLIENT_AGENT_SESSION_LINK_H_
#define DDP_CLIENT_AGENT_SESSION_LINK_H_

// The two sides of the agent's session with the coordinator, as plain
// interfaces so the agent core (agent.h) has no gRPC in it and its tests use a
// fake:
//   - CoordinatorLink: what the agent calls to send (GrpcSessionClient
//     implements it);
//   - SessionEvents: what the session calls when something arrives (Agent
//     implements it).
// The messages are the wire protos of ddp/v1/session.proto (plain protobuf
// data, no gRPC).

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ddp/v1/session.pb.h"

namespace ddp::client {

class CoordinatorLink {
 public:
  virtual ~CoordinatorLink() = default;

  // Sends one message. The link stamps job_id, node_id and incarnation into
  // the message's NodeHeader; the caller sets header.generation (the
  // generation the message is about). A message sent while the stream is down
  // is dropped: after a resume the coordinator re-sends what it waits for
  // (RequestMasterInfo, Assignment, StopWorkers) and the agent re-reports its
  // worker exits (SessionEvents::OnRegistered with reconnected=true).
  // Thread-safe; never blocks for long (no retries).
  virtual void Send(v1::AgentMessage message) = 0;

  // The generation this node's workers run (0: none). Used in heartbeats and
  // in the Register of a resume; clears LeaseExpired. Thread-safe.
  virtual void SetGeneration(int64_t generation) = 0;

  // The workers' lease ran out (worker_lease.h) and they are frozen: the
  // link drops its stream (a coordinator that stalled, or a leader that was
  // replaced, holds it) and registers again at once (a resume, to the next
  // coordinator of its list), saying so (Register.workers_frozen). The
  // answer decides: their generation still running thaws them, anything
  // else ends them. Thread-safe.
  virtual void LeaseExpired() = 0;
};

class SessionEvents {
 public:
  virtual ~SessionEvents() = default;

  // A Register was answered. `reconnected`: this was a re-registration of the
  // same incarnation after a broken stream (registered.resumed() tells whether
  // the coordinator still knew it).
  virtual void OnRegistered(const v1::Registered& registered, bool reconnected) = 0;
  // Any message after Registered, in stream order.
  virtual void OnCoordinatorMessage(const v1::CoordinatorMessage& message) = 0;
  // The coordinator refused this incarnation (ABORTED). Must return only once
  // the node's workers are stopped: the session then registers again with a
  // NEW incarnation and generation 0.
  virtual void OnFenced(const absl::Status& status) = 0;
  // The session gave up: the coordinator was unreachable past the connect (or
  // resume) timeout, or it refused the registration for good
  // (INVALID_ARGUMENT, FAILED_PRECONDITION, NOT_FOUND, RESOURCE_EXHAUSTED...).
  // No event follows.
  virtual void OnSessionFailed(const absl::Status& status) = 0;
  // The states of the current workers, for a heartbeat. Called on the
  // session's heartbeat thread: thread-safe, quick.
  virtual std::vector<v1::WorkerState> WorkerStates() = 0;
  // The lease the coordinator grants (Registered.lease_ms; zero: none),
  // before OnRegistered. (lease_kill_ms is for agents of earlier releases,
  // which stopped their workers; this one freezes them.)
  virtual void OnLeaseGranted(absl::Duration lease) = 0;
  // The coordinator acknowledged a heartbeat (HeartbeatAck), or answered a
  // Register, that this agent sent at `sent_at` (MonotonicClock): the lease
  // runs from then. `running_generation`: HeartbeatAck.running_generation
  // (for a Registered: its generation while RUNNING as a member, else 0).
  // Both are called on the session's reader thread, not queued (before the
  // Registered they belong to is delivered): thread-safe and quick.
  virtual void OnLeaseRenewed(absl::Time sent_at, int64_t running_generation) = 0;
};

// The NodeHeader of whichever message `message` holds (null when empty).
v1::NodeHeader* MutableHeader(v1::AgentMessage* message);

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_SESSION_LINK_H_
