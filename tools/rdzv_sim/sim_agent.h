#ifndef DDP_TOOLS_RDZV_SIM_SIM_AGENT_H_
#define DDP_TOOLS_RDZV_SIM_SIM_AGENT_H_

// The protocol of one simulated node agent (session.proto), without gRPC: what
// it answers to each coordinator order, and the header its messages carry.
//
//   connecting --Registered--> waiting --Assignment--> running
//                                 ^  | RequestMasterInfo   | StopWorkers
//                                 |  v (reply MasterInfo)  v (reply
//                                 +---------------------- stopping
//                                                          WorkersStopped)
//   any --JobFinished / NodeDismissed--> finished
//   any --stream ended with an error---> failed
//
// Headers name the last generation assigned (0 before the first); MasterInfo
// and WorkersStopped name the generation of the order they answer, as the
// coordinator's fencing requires. Each RequestMasterInfo gets a fresh port and
// a fresh 128-byte id (as ncclGetUniqueId would give).
//
// Possible errors: FAILED_PRECONDITION when an order arrives in a phase that
// does not expect it (a protocol violation by the coordinator), ABORTED for an
// assignment older than one already received.
// Thread-safety: not thread-safe; the owner serializes calls.

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ddp::rdzv_sim {

struct SimAgentIdentity {
  std::string job_id;
  std::string node_id;
  uint64_t incarnation = 1;  // non-zero
  int nproc = 8;
  std::string address = "127.0.0.1";
  int master_port_base = 29500;  // port of generation g: base + g % 1000
};

enum class SimAgentPhase { kConnecting, kWaiting, kRunning, kStopping, kFinished, kFailed };
absl::string_view PhaseName(SimAgentPhase phase);

struct NodeHeaderFields {
  std::string job_id;
  std::string node_id;
  uint64_t incarnation = 0;
  int64_t generation = 0;
};

struct MasterInfoReply {
  NodeHeaderFields header;
  int master_port = 0;
  std::string nccl_unique_id;  // 128 bytes
};

// A new generation reached this agent; ordinal counts them from 1.
struct AssignmentEvent {
  int ordinal = 0;
  int64_t generation = 0;
  absl::Time received;
  bool duplicate = false;  // the same generation again (resent): not counted
};

inline constexpr int kNcclUniqueIdBytes = 128;

class SimAgent {
 public:
  explicit SimAgent(SimAgentIdentity identity);

  const SimAgentIdentity& identity() const { return identity_; }
  SimAgentPhase phase() const { return phase_; }
  int group_rank() const { return group_rank_; }
  int64_t generation() const { return generation_; }
  int assignments() const { return assignments_; }

  void OnRegisterSent(absl::Time now);
  // Returns the registration round trip (Register sent -> Registered).
  absl::StatusOr<absl::Duration> OnRegistered(absl::Time now);
  absl::StatusOr<MasterInfoReply> OnRequestMasterInfo(int64_t generation);
  absl::StatusOr<AssignmentEvent> OnAssignment(int64_t generation, int group_rank, absl::Time now);
  // Returns the header of the WorkersStopped to send at once.
  absl::StatusOr<NodeHeaderFields> OnStopWorkers(int64_t generation);
  void OnFinished();
  void OnStreamFailed();

  // Whether heartbeats flow now (registered and not finished).
  bool ShouldHeartbeat() const;
  // Header of a Heartbeat / WorkerExited / Leave.
  NodeHeaderFields Header() const;
  // Header for reporting a worker exit; FAILED_PRECONDITION unless running.
  absl::StatusOr<NodeHeaderFields> WorkerExitHeader() const;

 private:
  absl::Status Unexpected(absl::string_view order) const;

  const SimAgentIdentity identity_;
  SimAgentPhase phase_ = SimAgentPhase::kConnecting;
  absl::Time register_sent_ = absl::InfinitePast();
  int64_t generation_ = 0;
  int group_rank_ = -1;
  int assignments_ = 0;
  std::mt19937_64 random_;
};

}  // namespace ddp::rdzv_sim

#endif  // DDP_TOOLS_RDZV_SIM_SIM_AGENT_H_
