#ifndef DDP_COORDINATOR_SESSION_JOB_PROTO_CONVERT_H_
#define DDP_COORDINATOR_SESSION_JOB_PROTO_CONVERT_H_

// Conversions between the ddp.v1 wire messages (jobs.proto, session.proto) and
// the rendezvous core's plain structs. Durations travel as milliseconds on the
// wire and as absl::Duration in the core; times as Unix milliseconds.
//
// Every FromProto function checks the sizes of the strings and bytes it copies
// against RendezvousLimits before copying them, so an oversized field never
// reaches the core. Semantic checks (settings ranges, fencing) stay in the
// core.
//
// Thread-safety: pure functions.

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/rendezvous/idle_hang.h"
#include "coordinator/rendezvous/job.h"
#include "coordinator/rendezvous/job_settings.h"
#include "coordinator/rendezvous/job_types.h"
#include "ddp/v1/jobs.pb.h"
#include "ddp/v1/session.pb.h"

namespace ddp::session {

// ---- jobs.proto ----

// Settings: the core keeps ddp.v1.JobSettings itself (rendezvous::JobSettings);
// a request's are filled by rendezvous::RequestedSettings (job_settings.h).

// Job events: the core keeps ddp.v1.JobEvent itself (rendezvous::JobEvent);
// nothing to convert.

// Jobs: the core builds the API's ddp.v1.Job itself (Job::Status); its state
// is rendezvous::JobStateToProto (job_types.h).

// ---- session.proto: agent -> coordinator ----

// Possible errors: INVALID_ARGUMENT when an id, the address, the token or the
// agent version is longer than its limit (named in the message).
absl::StatusOr<rendezvous::RegisterRequest> RegisterFromProto(
    const v1::Register& proto, const rendezvous::RendezvousLimits& limits);
// Possible errors: INVALID_ARGUMENT (id too long, negative generation).
absl::StatusOr<rendezvous::NodeRef> NodeRefFromProto(const v1::NodeHeader& proto,
                                                     const rendezvous::RendezvousLimits& limits);
// The error message is truncated to limits.max_message_length. A hang keeps
// its flag, with exit code and signal 0 (it had not exited), and a message
// that says so when the agent sent none. Possible errors: none today
// (StatusOr for symmetry with the checks of its siblings).
absl::StatusOr<rendezvous::WorkerExit> WorkerExitFromProto(
    const v1::WorkerExited& proto, const rendezvous::RendezvousLimits& limits);
// The progress reports a heartbeat carries (workers without one left out),
// dated on `now` less their age. Possible errors: INVALID_ARGUMENT (a local
// rank outside [0, max_nproc_per_node), a negative step or age, more than
// kMaxProgressMetrics metrics, a metric name longer than kMaxMetricNameBytes).
absl::StatusOr<std::vector<rendezvous::WorkerProgress>> ProgressFromProto(
    const v1::Heartbeat& proto, const rendezvous::RendezvousLimits& limits, absl::Time now);
// The workers' idleness a heartbeat carries (every worker listed; idle_hang.h),
// an idle one dated `now` less its idle_ms. Possible errors: INVALID_ARGUMENT
// (a local rank outside [0, max_nproc_per_node), a negative idle_ms, a
// cpu_busy_permille outside [0, kMaxCpuBusyPermille]).
absl::StatusOr<std::vector<rendezvous::WorkerActivity>> ActivityFromProto(
    const v1::Heartbeat& proto, const rendezvous::RendezvousLimits& limits, absl::Time now);
// When a preempted node leaves (Preempted.leave_at_unix_ms, a DrainNode's
// grace from `now`): a time already past is `now`. Possible errors:
// INVALID_ARGUMENT for 0 or less, or more than limits.max_timeout after `now`.
absl::StatusOr<absl::Time> LeaveAtFromProto(int64_t leave_at_unix_ms,
                                            const rendezvous::RendezvousLimits& limits,
                                            absl::Time now);
// Possible errors: INVALID_ARGUMENT when the NCCL unique id is neither empty
// nor 128 bytes, or the address is too long.
absl::StatusOr<rendezvous::MasterInfo> MasterInfoFromProto(
    const v1::MasterInfo& proto, const rendezvous::RendezvousLimits& limits);

// ---- session.proto: coordinator -> agent ----

// role: MEMBER for a member of the current generation or a node waiting in an
// open rendezvous (a candidate of the next one), SPARE otherwise.
void RegisteredToProto(const rendezvous::RegisterResult& result, v1::Registered* proto);
void OutboundToProto(const rendezvous::MessageBody& body, v1::CoordinatorMessage* proto);

// Bounds of a progress report's metrics (the agent keeps to them).
inline constexpr int kMaxProgressMetrics = 16;
inline constexpr size_t kMaxMetricNameBytes = 64;

// Longest token / agent version accepted in Register.
inline constexpr size_t kMaxTokenBytes = 1024;
inline constexpr size_t kMaxAgentVersionBytes = 256;

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_JOB_PROTO_CONVERT_H_
