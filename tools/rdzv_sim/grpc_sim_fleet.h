#ifndef DDP_TOOLS_RDZV_SIM_GRPC_SIM_FLEET_H_
#define DDP_TOOLS_RDZV_SIM_GRPC_SIM_FLEET_H_

// N simulated node agents of one job in this process, each on its own Session
// stream, spread over `channels` separate TCP connections (one subchannel pool
// per channel). Heartbeats come from `heartbeat_threads` named pacing threads,
// each owning a contiguous slice of the agents and spreading that slice's
// heartbeats evenly over the interval (HeartbeatPacer).
//
//   Create (channels connected) --Rendezvous--> assigned --Restart--> assigned
//     ... heartbeating ... --Shutdown (CancelJob, end streams)--> done
//
// Possible errors: UNAVAILABLE channels not connected by connect_timeout;
// Rendezvous/Restart: ProgressTracker::WaitForAssignments's errors;
// FAILED_PRECONDITION calling them out of order.
// Thread-safety: the driver methods are called from one thread; the streams
// and pacing threads are internally synchronized.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "ddp/v1/jobs.grpc.pb.h"
#include "ddp/v1/session.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/rdzv_sim/async_client_queues.h"
#include "tools/rdzv_sim/grpc_agent_stream.h"
#include "tools/rdzv_sim/heartbeat_pacer.h"
#include "tools/rdzv_sim/progress_tracker.h"

namespace ddp::rdzv_sim {

struct SimFleetOptions {
  std::string target;  // host:port of the coordinator
  std::string job_id;
  int nodes = 256;
  int channels = 64;
  int heartbeat_threads = 4;
  absl::Duration pacer_tick = absl::Milliseconds(10);
  int nproc = 8;
  v1::JobSettings settings;  // every agent's flags; heartbeat_interval_ms used
  absl::Duration connect_timeout = absl::Seconds(10);
  uint64_t seed = 1;           // incarnations are drawn from it (never 0)
  bool ack_heartbeats = true;  // Heartbeat.sequence set: the coordinator acknowledges
  int completion_queues = 4;   // the streams' queues, each with a thread (AsyncClientQueues)
  absl::Duration keepalive;    // > 0: HTTP/2 keepalive pings this often on each connection
};

// One wave of assignments: from `started` to the last agent's.
struct WaveTiming {
  absl::Duration elapsed;
  absl::Duration issue_spread;  // time the driver took to send the trigger(s)
  int64_t generation = 0;
};

class GrpcSimFleet {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcSimFleet>> Create(SimFleetOptions options,
                                                              const Clock& clock);
  ~GrpcSimFleet();
  GrpcSimFleet(const GrpcSimFleet&) = delete;
  GrpcSimFleet& operator=(const GrpcSimFleet&) = delete;

  // Starts the pacing threads, opens every stream (Register), and waits
  // until every agent has its first assignment.
  absl::StatusOr<WaveTiming> Rendezvous(absl::Time deadline);
  // One agent reports worker 0 exited with code 1; waits until every agent
  // has the assignment of the next generation.
  absl::StatusOr<WaveTiming> Restart(absl::Time deadline);

  int64_t heartbeats_sent() const { return counters_.heartbeats_sent.load(); }
  int64_t heartbeats_dropped() const { return counters_.heartbeats_dropped.load(); }
  // Of heartbeats_sent(): those sent as datagrams.
  int64_t heartbeat_datagrams() const { return counters_.heartbeat_datagrams.load(); }
  // Since the pacing threads started.
  SimPacing pacing() const;
  ProgressTracker& tracker() { return tracker_; }

  // Cancels the job (JobFinished to every agent), cancels streams still open
  // after `timeout`, stops the pacing threads. Idempotent.
  // Possible errors: the CancelJob call's; DEADLINE_EXCEEDED when streams did
  // not end (they are then leaked rather than freed under gRPC).
  absl::Status Shutdown(absl::Duration timeout);

 private:
  GrpcSimFleet(SimFleetOptions options, const Clock& clock);
  void PacerLoop(int begin, int end);
  void StopPacers();

  const SimFleetOptions options_;
  const Clock& clock_;
  ProgressTracker tracker_;
  AgentStreamCounters counters_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::SessionService::Stub>> stubs_;
  std::unique_ptr<AsyncClientQueues> queues_;  // outlives streams_
  std::vector<std::unique_ptr<GrpcAgentStream>> streams_;
  // Heartbeats over UDP when the coordinator offers them; stopped (destroyed)
  // before the streams its threads call.
  std::unique_ptr<SimDatagrams> datagrams_;
  int assignments_seen_ = 0;  // waves completed (driver thread only)
  bool shut_down_ = false;
  bool streams_started_ = false;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration longest_pacer_pause_ ABSL_GUARDED_BY(mu_);
  int64_t pacer_skipped_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> pacers_;
};

}  // namespace ddp::rdzv_sim

#endif  // DDP_TOOLS_RDZV_SIM_GRPC_SIM_FLEET_H_
