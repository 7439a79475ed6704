// Job: timeouts. Tick is cheap when nothing is due: the heartbeat scan runs
// only once the earliest heartbeat deadline seen by the previous scan has
// passed (heartbeats only move deadlines later, new nodes lower the bound in
// AddNode).

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/rendezvous/job.h"

namespace ddp::rendezvous {

void Job::RemoveSilentNodes(absl::Time now) {
  for (const std::string& id : membership_.Silent(now)) {
    if (IsTerminal(state_)) break;
    RemoveNode(id, absl::StrCat("lost: no heartbeat or resumed session for ",
                                absl::FormatDuration(settings_.heartbeat_timeout)));
  }
}

void Job::ServingResumed(absl::Duration gap) {
  if (IsTerminal(state_)) return;
  const absl::Time now = clock_->Now();
  membership_.ServingResumed(now);
  round_.Postpone(gap);
  stop_barrier_.Postpone(gap);
}

void Job::Tick() {
  if (IsTerminal(state_)) return;
  const absl::Time now = clock_->Now();
  RemoveSilentNodes(now);
  switch (state_) {
    case JobState::kWaiting:
      if (round_.LastCallOver(now, settings_.last_call_timeout)) {
        CloseRendezvous();
      } else if (round_.JoinTimedOut(now)) {
        FailureInfo failure;
        failure.generation = round_.generation();
        failure.time = now;
        failure.message = absl::StrCat("rendezvous timed out: ", membership_.size(),
                                       " of min_nodes=", settings_.min_nodes,
                                       " nodes joined within the join timeout of ",
                                       absl::FormatDuration(settings_.join_timeout));
        Finish(JobState::kFailed, failure, failure.message);
      }
      break;
    case JobState::kStarting:
      if (round_.MasterInfoOverdue(now)) {
        if (round_.members().by_rank.empty() || round_.members().by_rank[0].empty()) {
          // No group rank 0 to ask (a stored job restored without it): form again.
          OpenRendezvous(/*after_restart=*/true);
        } else {
          // Group rank 0 did not answer: declare it dead and form again.
          RemoveNode(round_.members().by_rank[0],
                     absl::StrCat("declared dead: no master info within ",
                                  absl::FormatDuration(settings_.shutdown_timeout)));
        }
      }
      break;
    case JobState::kRestarting:
      if (stop_barrier_.complete()) {
        MaybeFinishStopBarrier();  // waiting for the leases of removed members
      } else if (now >= stop_barrier_.deadline()) {
        for (const std::string& id : stop_barrier_.Awaited()) {
          RemoveNode(id, absl::StrCat("declared dead: workers not confirmed stopped "
                                      "within ",
                                      absl::FormatDuration(settings_.shutdown_timeout)));
        }
      }
      break;
    default:
      break;
  }
}

}  // namespace ddp::rendezvous
