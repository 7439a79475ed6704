#ifndef DDP_COORDINATOR_RENDEZVOUS_JOB_TYPES_H_
#define DDP_COORDINATOR_RENDEZVOUS_JOB_TYPES_H_

// Plain value types of the rendezvous core: the inputs a session layer feeds
// in, the messages the core wants delivered to agents (the outbox) and the job
// events a WatchJob stream shows. No behaviour lives here.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "coordinator/rendezvous/job_settings.h"
#include "ddp/state/v1/records.pb.h"
#include "ddp/v1/jobs.pb.h"

namespace ddp::rendezvous {

using Generation = int64_t;    // job-wide, monotonic; 0 = no generation yet
using Incarnation = uint64_t;  // new every time an agent starts; 0 is invalid
inline constexpr int kNcclUniqueIdBytes = 128;

// See job.h for the diagram.
enum class JobState {
  kWaiting = 0,     // rendezvous open, collecting nodes
  kStarting = 1,    // rank table fixed, waiting for group rank 0's master info
  kRunning = 2,     // assignment pushed; workers run
  kRestarting = 3,  // stop barrier: waiting for every member to stop its workers
  kSucceeded = 4,
  kFailed = 5,
  kCancelled = 6,
};
const char* JobStateName(JobState state);
inline bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}
inline bool IsTerminal(v1::JobState s) {
  return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED;
}
// The API's name of a state (jobs.proto JobState: the numbers differ, the
// stored records keep the core's).
v1::JobState JobStateToProto(JobState state);
// Possible errors: INVALID_ARGUMENT for JOB_STATE_UNSPECIFIED or an unknown
// value.
absl::StatusOr<JobState> JobStateFromProto(v1::JobState state);

// What one worker last reported of its progress (the Python package's
// report_progress), as its agent relayed it; kept in memory only.
struct WorkerProgress {
  int local_rank = 0;
  Generation generation = 0;  // the node's generation when it was relayed
  int64_t step = 0;
  double steps_per_second = 0;  // 0: not known yet
  absl::Time reported;          // when the worker made it (coordinator's clock)
  std::map<std::string, double> metrics;
  // The worker's last checkpoint (report_checkpoint; its clock), if any.
  std::optional<absl::Time> checkpoint;
  int64_t checkpoint_step = 0;
  // Set by Job::Status (stragglers.h): its speed over the generation's median
  // (0: not scored), whether that makes it a straggler, and from what.
  double relative_speed = 0;
  bool straggler = false;
  v1::SpeedSource speed_source = v1::SPEED_SOURCE_UNSPECIFIED;
  // > 0: no report but the CPU share of one core its agent measured
  // (AddCpuBusyRanks): scored from that alone.
  double cpu_busy = 0;
};

// Header of every message a registered node sends (fencing).
struct NodeRef {
  std::string job_id;
  std::string node_id;
  Incarnation incarnation = 0;
  Generation generation = 0;  // the last generation assigned to the node, or 0
};

// One worker failure, or the reason a job failed without one (node_id empty,
// local_rank and global_rank -1): the API's message itself (jobs.proto
// Failure), one record from the agent's report to the API's answer. The core
// keeps it (RestartPolicy's history and root cause, job events), the stores
// persist it (state.v1 JobRecord), the adapters answer with it. Adding a field
// touches jobs.proto, the code that sets it and its test.
//
// Its times are Unix milliseconds (time_unix_ms: when it failed, as the agent
// tells it: a hang's last heartbeat, an exit's error-file timestamp, else
// when the exit was seen; 0: unknown). Agents' clocks are compared as they
// are: keep them synchronized (NTP). Its strings are valid UTF-8 (Utf8Prefix
// and Utf8Suffix cut them): they are proto3 strings. Only the newest
// RendezvousLimits::max_failures_with_logs failures of a job keep
// stderr_tail and traceback (RestartPolicy); events carry none of them.
using FailureInfo = ::ddp::v1::Failure;

// A failure of nobody's worker (a lost node, a cancelled job): ranks -1.
FailureInfo NodeFailure(std::string node_id, Generation generation, absl::Time time,
                        std::string message);
absl::Time FailureTime(const FailureInfo& failure);
void SetFailureTime(absl::Time time, FailureInfo* failure);

// The order of failures by when they happened: the root cause of a generation
// is its earliest failure (torchrun's rule). A hang of a stopped process comes
// before everything (it stalls its peers, whatever the heartbeat times say);
// then earlier time first; at equal times the lower global rank (node-level
// failures, rank -1, first).
bool FailedEarlier(const FailureInfo& a, const FailureInfo& b);

// How it failed, for messages: "exit code 3", "signal 9 (SIGKILL)",
// "hang (no heartbeat)", or the message when it was no worker's failure.
std::string DescribeFailure(const FailureInfo& failure);

// The longest prefix of `text` of at most `limit` bytes that does not cut a
// UTF-8 sequence; Utf8Suffix the longest such suffix (a stderr tail or a
// traceback ends with what matters: the exception line).
std::string Utf8Prefix(absl::string_view text, int limit);
std::string Utf8Suffix(absl::string_view text, int limit);
// `text` with every byte that is not part of a valid UTF-8 sequence replaced
// by U+FFFD (records of earlier releases kept bytes).
std::string ValidUtf8(absl::string_view text);

// ---- Inputs ----

struct RegisterRequest {
  std::string job_id;
  std::string node_id;
  Incarnation incarnation = 0;
  int nproc = 0;                 // 0: the job's nproc_per_node
  int requested_rank = -1;       // --node-rank; -1: none
  std::string role = "default";  // --role of the node's workers
  std::string address;           // how other nodes reach it (MASTER_ADDR default)
  // The agent's own flags. Absent: join an existing job only (NOT_FOUND
  // otherwise).
  std::optional<JobSettings> settings;
  // A resume after the agent's lease ran out and it stopped its workers of
  // its generation (NodeRef::generation of the resume): agents of earlier
  // releases. This release's agents freeze them and resume without it.
  bool lease_expired = false;
  // A resume: the generation the agent's workers ran (0: none).
  Generation generation = 0;
};

enum class NodeRole { kMember = 0, kWaiting = 1 };

struct RegisterResult {
  JobSettings settings;  // the job's, which win over the agent's flags
  JobState state = JobState::kWaiting;
  Generation generation = 0;  // the job's current generation
  NodeRole role = NodeRole::kWaiting;
  bool created_job = false;  // this registration created the job
  bool resumed = false;      // same incarnation came back: session resumed
};

// A worker's exit or hang, as its agent reported it: a Failure whose
// local_rank, exit_code, signal, message, time, hang, pid, process_stopped
// and output are filled (the core fills node_id, generation and global_rank).
using WorkerExit = FailureInfo;
// An exit with code 0 that was no hang: not a failure.
inline bool ExitedCleanly(const WorkerExit& exit) {
  return exit.exit_code() == 0 && exit.signal() == 0 && !exit.hang();
}

// What group rank 0 answers for a generation: the stored message itself
// (ddp.state.v1.MasterRecord), from the agent's answer (session's
// MasterInfoFromProto) through RendezvousRound to the job's record.
//   master_addr: empty: the node's registered address.
//   master_port; nccl_unique_id: exactly kNcclUniqueIdBytes bytes, or empty
//   (no NCCL on the node).
using MasterInfo = ::ddp::state::v1::MasterRecord;
MasterInfo NewMasterInfo(std::string master_addr, int master_port, std::string nccl_unique_id);

// ---- Outputs (the outbox) ----

struct Assignment {
  Generation generation = 0;
  int restart_count = 0;
  int max_restarts = 0;
  int group_rank = 0;
  int group_world_size = 0;
  int64_t global_rank_offset = 0;  // RANK = offset + LOCAL_RANK
  int local_world_size = 0;
  int64_t world_size = 0;
  std::string master_addr;
  int master_port = 0;
  std::string nccl_unique_id;
  // Ranks among the workers of this node's role; role_world_size 0: unknown.
  int64_t role_rank_offset = 0;
  int64_t role_world_size = 0;
};
// Sent to group rank 0: pick a free port, call ncclGetUniqueId, answer
// MasterInfo.
struct RequestMasterInfo {
  Generation generation = 0;
};
// Stop every worker of `generation` (SIGTERM, SIGKILL after the shutdown
// timeout), then answer WorkersStopped.
struct StopWorkers {
  Generation generation = 0;
  std::string reason;
  bool take_stacks = false;  // a declared hang: stacks first (session.proto)
};
// The job ended: stop the workers and exit (non-zero unless kSucceeded).
struct JobFinished {
  JobState state = JobState::kSucceeded;
  std::optional<FailureInfo> root_cause;
  std::string message;
};
// This node was excluded or declared dead (stop the workers and exit
// non-zero), or drained (it leaves as it announced or was asked to).
struct NodeDismissed {
  std::string reason;
  bool drained = false;
};
// A member (node_id, perhaps the receiver) leaves at `leaves_at` at the latest
// (a drain or preemption): the agent hands the notice to its workers.
struct DrainNotice {
  Generation generation = 0;
  std::string node_id;
  absl::Time leaves_at;
  std::string reason;
};

// Something the node's operator should see in its log (e.g. another node was
// refused for contradicting the job's settings).
struct Notice {
  std::string message;
};

// The answer to a Register: the first message of a session, sent (like every
// other message) once the registration is durable.
struct Registered {
  RegisterResult result;
};

// Asks the agent for its workers' Python stacks (ddpctl jobs stacks); sent
// outside the core, by the stack collector (coordinator/session).
struct RequestStacks {
  uint64_t request_id = 0;
};

using MessageBody = std::variant<Registered, Assignment, RequestMasterInfo, StopWorkers,
                                 JobFinished, NodeDismissed, Notice, RequestStacks, DrainNotice>;

struct OutboundMessage {
  std::string job_id;
  std::string node_id;
  Incarnation incarnation = 0;  // deliver only to this incarnation's session
  MessageBody body;
};

// One job event: the API's message itself (jobs.proto JobEvent), one record
// from the core that emits it to the WatchJob stream that shows it. The core
// keeps the newest RendezvousLimits::max_retained_events of each job, the
// stores persist them (storage/job_record_codec: the stored form,
// state.v1.JobEventRecord, keeps the bytes of earlier releases), the adapters
// stream them as kept. Its time is Unix milliseconds (EventTime); its failure,
// when it has one, carries no stderr_tail or traceback (Job::NewEvent).
using JobEvent = ::ddp::v1::JobEvent;
// JobEvent::JOB_CREATED ... JobEvent::NODE_DRAINING (NODE_LOST: heartbeat
// timeout, left, declared dead, excluded, replaced; NODE_DRAINING: a node
// announced it leaves, drain or preemption).
using JobEventType = JobEvent::Type;
// Why a generation was stopped for a restart (RESTARTING events):
// RestartCause::WORKER_FAILURE, HANG, NODE_LOSS, SCALE, OPERATOR, DRAIN;
// RESTART_CAUSE_UNSPECIFIED on every other event.
using RestartCause = ::ddp::v1::RestartCause;
// "worker_failure", "hang", "node_loss", "scale", "operator", "drain" ("" for
// RESTART_CAUSE_UNSPECIFIED): the values of the metrics' cause label.
const char* RestartCauseName(RestartCause cause);

absl::Time EventTime(const JobEvent& event);
void SetEventTime(absl::Time time, JobEvent* event);

// What the core wants done, in the order it happened.
struct Outbox {
  std::vector<OutboundMessage> messages;
  std::vector<JobEvent> events;
  bool empty() const { return messages.empty() && events.empty(); }
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_JOB_TYPES_H_
