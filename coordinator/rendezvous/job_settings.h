#ifndef DDP_COORDINATOR_RENDEZVOUS_JOB_SETTINGS_H_
#define DDP_COORDINATOR_RENDEZVOUS_JOB_SETTINGS_H_

// Settings of one training job (torchrun's --nnodes, --nproc-per-node,
// --max-restarts, rendezvous timeouts) and the hard limits every setting is
// checked against.
//
// Thread-safety: plain values; the functions are pure.

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ddp/v1/jobs.pb.h"

namespace ddp::rendezvous {

// Hard limits of the coordinator. Every value coming from the network is
// checked against these before any allocation proportional to it.
struct RendezvousLimits {
  int max_nodes = 65536;           // upper bound for JobSettings::max_nodes
  int max_nproc_per_node = 1024;   // upper bound for any node's process count
  int max_restarts = 100000;       // upper bound for JobSettings::max_restarts
  int max_spare_nodes = 1024;      // registered nodes beyond max_nodes per job
  int max_excluded_nodes = 16384;  // ExcludeNode entries per job
  int max_retained_events = 8192;  // per job, for WatchJob catch-up
  int max_retained_failures = 64;  // per job, failure history (newest kept)
  int max_past_runs = 16;          // finished runs kept per job id (newest kept)
  int max_id_length = 253;         // job ids and node ids
  int max_address_length = 255;    // node / master address
  int max_message_length = 4096;   // error-file messages, reasons (truncated)
  // A failure's worker output (FailureInfo): its stderr tail and traceback
  // keep their last bytes, the log path is cut; only the newest
  // max_failures_with_logs failures of a job keep tail and traceback.
  int max_stderr_tail_bytes = 8 << 10;
  int max_traceback_bytes = 8 << 10;
  int max_log_path_length = 4096;
  int max_failures_with_logs = 8;
  absl::Duration min_heartbeat_interval = absl::Milliseconds(10);
  absl::Duration max_timeout = absl::Hours(24 * 7);
};

// The bounds of JobSettings::straggler_exclude_factor when it is on: below
// 1.1 normal jitter would exclude nodes; above 100 nothing would be.
inline constexpr double kMinStragglerExcludeFactor = 1.1;
inline constexpr double kMaxStragglerExcludeFactor = 100;
inline constexpr absl::Duration kDefaultStragglerExcludeAfter = absl::Seconds(60);
// JobSettings::hang_timeout when a request leaves it unset, and its least
// value when on: the agents sample their workers' activity once a second, so
// one quiet sample must never count as a hang.
inline constexpr absl::Duration kDefaultHangTimeout = absl::Seconds(10);
inline constexpr absl::Duration kMinHangTimeout = absl::Seconds(2);

// The settings of one job: the API's message itself (jobs.proto JobSettings),
// one record from the request (RequestedSettings fills what a request left
// unset) through the core and the stores (state.v1 JobRecord.settings) to the
// API's answer. Durations are whole milliseconds (the *_ms fields); the core
// reads them as absl::Duration through the accessors below. Adding a setting
// touches jobs.proto, ValidateJobSettings, the code that reads it and its test.
//
//   min_nodes, max_nodes: the job's size.
//   nproc_per_node: processes of a node that registers without its own count
//     (0 = "use the job's"; nodes may register different counts).
//   max_restarts: job-wide budget of restarts caused by worker failures
//     (membership changes are free).
//   join_timeout: a rendezvous that has not closed this long after it opened
//     fails the job.
//   last_call_timeout: once min_nodes have joined, the rendezvous waits this
//     long for more, then closes.
//   heartbeat_interval, heartbeat_timeout: agents heartbeat this often; a node
//     silent for heartbeat_timeout is lost.
//   shutdown_timeout: the time an agent gets to confirm its workers stopped
//     (stop barrier) or, on group rank 0, to answer with MASTER_PORT and the
//     NCCL unique id; then it is declared dead.
//   straggler_exclude_factor, straggler_exclude_after (stragglers.h): 0 keeps
//     the policy off; otherwise a member with a rank slower than 1 / factor of
//     the median for straggler_exclude_after is drained at once (no budget
//     spent).
//   hang_timeout (idle_hang.h): every worker of every member node without CPU
//     or I/O for this long is a hang; 0: off; unset (records stored before the
//     setting existed): kDefaultHangTimeout.
using JobSettings = ::ddp::v1::JobSettings;

// Every field at its default: 1 node of 1 process, 3 restarts, join 600 s,
// last call 30 s, heartbeat every 500 ms and lost after 3 s, shutdown 30 s,
// no straggler policy, hang timeout kDefaultHangTimeout.
JobSettings DefaultJobSettings();

absl::Duration JoinTimeout(const JobSettings& settings);
absl::Duration LastCallTimeout(const JobSettings& settings);
absl::Duration HeartbeatInterval(const JobSettings& settings);
absl::Duration HeartbeatTimeout(const JobSettings& settings);
absl::Duration ShutdownTimeout(const JobSettings& settings);
absl::Duration StragglerExcludeAfter(const JobSettings& settings);
// Unset: kDefaultHangTimeout.
absl::Duration HangTimeout(const JobSettings& settings);

// The lease of a node's agent (session.proto): with no heartbeat acknowledged for `lease`,
// counted from the send time of its last acknowledged heartbeat, the agent freezes its workers
// (agents of earlier releases sent SIGTERM, and SIGKILL at `kill_after`, still granted for
// them). Both come before heartbeat_timeout, which the coordinator counts from the receipt of
// that heartbeat before it may declare the node lost: the workers of a node that is cut off are
// frozen before a generation can start without it. lease = 2/3 and kill_after = 5/6 of
// heartbeat_timeout (2 s and 2.5 s by default); silent node loss is declared after
// heartbeat_timeout (docs/operations.md, "Leases").
struct WorkerLease {
  absl::Duration lease;
  absl::Duration kill_after;
};
WorkerLease LeaseFor(const JobSettings& settings);

// A request's settings (CreateJob, an agent's Register): the one place where
// the request deliberately differs from the record. proto3 cannot tell
// "unset" from 0, so an unset (zero) field takes DefaultJobSettings' value,
// max_nodes takes min_nodes, and max_restarts stays 0 ("none"); a straggler
// policy turned on without a duration gets kDefaultStragglerExcludeAfter; the
// result holds every field (hang_timeout_ms set). A stored record is taken as
// it is. Validate the result (ValidateJobSettings).
JobSettings RequestedSettings(const v1::JobSettings& proto);

// Checks every field against `limits`:
//   1 <= min_nodes <= max_nodes <= limits.max_nodes
//   1 <= nproc_per_node <= limits.max_nproc_per_node
//   0 <= max_restarts <= limits.max_restarts
//   0 < join_timeout <= limits.max_timeout
//   0 <= last_call_timeout <= join_timeout
//   limits.min_heartbeat_interval <= heartbeat_interval
//   2 * heartbeat_interval <= heartbeat_timeout <= limits.max_timeout
//   0 < shutdown_timeout <= limits.max_timeout
//   straggler_exclude_factor 0 (off) or in [kMinStragglerExcludeFactor,
//   kMaxStragglerExcludeFactor]; then 0 < straggler_exclude_after <=
//   limits.max_timeout
//   hang_timeout 0 (off) or in [kMinHangTimeout, limits.max_timeout]
// Possible errors: INVALID_ARGUMENT naming the field, its value and the limit.
absl::Status ValidateJobSettings(const JobSettings& settings, const RendezvousLimits& limits);

// Whether a node that joins an existing job with its own flags agrees with the
// job: min_nodes, max_nodes and max_restarts must be equal (process count and
// timeouts may differ: a node's own process count is honoured, the job's
// timeouts win). Possible errors: FAILED_PRECONDITION naming the field and both
// values.
absl::Status CheckCompatibleSettings(const std::string& job_id, const JobSettings& job,
                                     const std::string& node_id, const JobSettings& node);

// Checks a job id or node id: 1..limits.max_id_length characters of
// [A-Za-z0-9._:-]. `what` names it in the message ("job id", "node id").
// Possible errors: INVALID_ARGUMENT.
absl::Status ValidateId(const std::string& id, const char* what, const RendezvousLimits& limits);

// Shortens untrusted text for an error message: at most 64 characters, with a
// "...(N bytes)" suffix when cut.
std::string Capped(const std::string& text);

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_JOB_SETTINGS_H_
