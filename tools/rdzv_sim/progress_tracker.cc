#include "tools/rdzv_sim/progress_tracker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ddp::rdzv_sim {

void ProgressTracker::RecordRegistered(absl::Duration round_trip) {
  absl::MutexLock lock(&mu_);
  round_trips_.push_back(round_trip);
}

void ProgressTracker::RecordAssignment(int ordinal, int64_t generation, absl::Time received) {
  absl::MutexLock lock(&mu_);
  AssignmentWave& wave = waves_[ordinal];
  ++wave.count;
  wave.first = std::min(wave.first, received);
  wave.last = std::max(wave.last, received);
  wave.min_generation = std::min(wave.min_generation, generation);
  wave.max_generation = std::max(wave.max_generation, generation);
  wave.received.push_back(received);
}

void ProgressTracker::RecordFailure(const std::string& node_id, const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  ++failures_;
  if (first_failure_.ok()) {
    first_failure_ = absl::Status(
        status.code(), absl::StrCat("stream of node '", node_id, "' ended: ", status.message()));
  }
}

void ProgressTracker::RecordStreamDone() {
  absl::MutexLock lock(&mu_);
  ++streams_done_;
}

absl::StatusOr<AssignmentWave> ProgressTracker::WaitForAssignments(int ordinal,
                                                                   absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, ordinal]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!first_failure_.ok()) return true;
    auto it = waves_.find(ordinal);
    return it != waves_.end() && it->second.count >= agents_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&reached), deadline);
  if (!first_failure_.ok()) return first_failure_;
  auto it = waves_.find(ordinal);
  const int have = it == waves_.end() ? 0 : it->second.count;
  if (have < agents_) {
    return absl::DeadlineExceededError(absl::StrCat("only ", have, " of ", agents_,
                                                    " agents received ", "assignment #", ordinal,
                                                    " before the deadline"));
  }
  if (it->second.min_generation != it->second.max_generation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "assignment #", ordinal, " names generations ", it->second.min_generation, "..",
        it->second.max_generation, "; every agent of a rendezvous must get the same one"));
  }
  return it->second;
}

bool ProgressTracker::WaitForStreamsDone(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return streams_done_ >= agents_; };
  return mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
}

std::vector<absl::Duration> ProgressTracker::registration_round_trips() const {
  absl::MutexLock lock(&mu_);
  return round_trips_;
}

int ProgressTracker::failures() const {
  absl::MutexLock lock(&mu_);
  return failures_;
}

int ProgressTracker::streams_done() const {
  absl::MutexLock lock(&mu_);
  return streams_done_;
}

}  // namespace ddp::rdzv_sim
