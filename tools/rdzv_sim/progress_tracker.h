#ifndef DDP_TOOLS_RDZV_SIM_PROGRESS_TRACKER_H_
#define DDP_TOOLS_RDZV_SIM_PROGRESS_TRACKER_H_

// Collects what the simulated agents observe (registration round trips, the
// k-th assignment of every agent, stream failures) and lets the driver wait
// for "every agent has its k-th assignment".
//
// Possible errors (WaitForAssignments): DEADLINE_EXCEEDED naming how many of
// the agents had it; the first stream failure recorded (its own code, e.g.
// INVALID_ARGUMENT from the coordinator), prefixed with the node id;
// FAILED_PRECONDITION when the agents disagree on the generation.
// Thread-safety: thread-safe.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ddp::rdzv_sim {

// Every agent's k-th assignment.
struct AssignmentWave {
  int count = 0;
  absl::Time first = absl::InfiniteFuture();
  absl::Time last = absl::InfinitePast();
  int64_t min_generation = INT64_MAX;
  int64_t max_generation = INT64_MIN;
  std::vector<absl::Time> received;
};

class ProgressTracker {
 public:
  explicit ProgressTracker(int agents) : agents_(agents) {}

  int agents() const { return agents_; }

  void RecordRegistered(absl::Duration round_trip);
  void RecordAssignment(int ordinal, int64_t generation, absl::Time received);
  // A stream ended with an error while the run expected it to live.
  void RecordFailure(const std::string& node_id, const absl::Status& status);
  void RecordStreamDone();

  // Blocks until every agent has its `ordinal`-th assignment, a failure is
  // recorded, or `deadline` passes.
  absl::StatusOr<AssignmentWave> WaitForAssignments(int ordinal, absl::Time deadline);
  // Blocks until every stream has ended; false at the deadline.
  bool WaitForStreamsDone(absl::Time deadline);

  std::vector<absl::Duration> registration_round_trips() const;
  int failures() const;
  int streams_done() const;

 private:
  const int agents_;
  mutable absl::Mutex mu_;
  std::vector<absl::Duration> round_trips_ ABSL_GUARDED_BY(mu_);
  std::map<int, AssignmentWave> waves_ ABSL_GUARDED_BY(mu_);
  absl::Status first_failure_ ABSL_GUARDED_BY(mu_);
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
  int streams_done_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ddp::rdzv_sim

#endif  // DDP_TOOLS_RDZV_SIM_PROGRESS_TRACKER_H_
