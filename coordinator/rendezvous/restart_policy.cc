#include "coordinator/rendezvous/restart_policy.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ddp::rendezvous {

Disruption Disruption::WorkerFailure(FailureInfo failure) {
  Disruption d;
  d.kind = Kind::kWorkerFailure;
  d.failure = std::move(failure);
  return d;
}

Disruption Disruption::AgentReplaced(std::string node_id, Incarnation old_incarnation,
                                     Incarnation new_incarnation, bool old_session_lost) {
  Disruption d;
  d.kind = Kind::kAgentReplaced;
  d.node_id = std::move(node_id);
  d.old_incarnation = old_incarnation;
  d.new_incarnation = new_incarnation;
  d.old_session_lost = old_session_lost;
  return d;
}

Disruption Disruption::MembershipChange(RestartCause cause, std::string reason) {
  Disruption d;
  d.kind = Kind::kMembershipChange;
  d.cause = cause;
  d.reason = std::move(reason);
  return d;
}

RestartPolicy::RestartPolicy(const Options& options, int restart_count,
                             std::optional<FailureInfo> root_cause,
                             std::vector<FailureInfo> failures)
    : options_(options),
      restart_count_(restart_count),
      root_cause_(std::move(root_cause)),
      failures_(std::move(failures)) {}

std::string RestartPolicy::FailureSentence(const FailureInfo& failure) {
  if (failure.local_rank() < 0) return failure.message();
  return absl::StrCat("worker ", failure.local_rank(), " (rank ", failure.global_rank(),
                      ") on node '", failure.node_id(), "' failed: ", DescribeFailure(failure));
}

RestartDecision RestartPolicy::Decide(const Disruption& disruption, const RestartContext& context) {
  RestartDecision decision;
  switch (disruption.kind) {
    case Disruption::Kind::kWorkerFailure:
      return DecideWorkerFailure(disruption.failure, context);
    case Disruption::Kind::kAgentReplaced: {
      if (context.state != JobState::kRunning) return decision;
      if (disruption.old_session_lost) {
        // The old agent died (or was cut off) and this is its replacement: a
        // membership change rather than a worker failure.
        decision.action = RestartDecision::Action::kRestart;
        decision.cause = RestartCause::NODE_LOSS;
        decision.reason = absl::StrCat(
            "node '", disruption.node_id, "' was lost (its agent's session closed) and ",
            "a new agent replaced it (incarnation ", disruption.old_incarnation, " -> ",
            disruption.new_incarnation,
            "); a membership change: the restart budget is not charged");
        return decision;
      }
      FailureInfo failure = NodeFailure(
          disruption.node_id, context.generation, context.now,
          absl::StrCat("agent of node '", disruption.node_id, "' restarted (incarnation ",
                       disruption.old_incarnation, " -> ", disruption.new_incarnation,
                       "); its workers of generation ", context.generation, " are gone"));
      Record(failure, decision);
      return Charge(failure, context.now, std::move(decision));
    }
    case Disruption::Kind::kMembershipChange:
      if (context.state != JobState::kRunning) return decision;
      decision.action = RestartDecision::Action::kRestart;
      decision.cause = disruption.cause;
      decision.reason = disruption.reason;
      return decision;
  }
  return decision;
}

RestartDecision RestartPolicy::DecideWorkerFailure(const FailureInfo& failure,
                                                   const RestartContext& context) {
  if (context.state == JobState::kRunning) {
    if (context.lost_peer.has_value()) return DecideKnockOn(failure, *context.lost_peer, context);
    RestartDecision decision;
    Record(failure, decision);
    if (restart_count_ < options_.max_restarts && CrashLoop(failure, context)) {
      root_cause_ = failure;
      crash_loop_message_ = absl::StrCat(
          FailureSentence(failure), "; the same failure ended each of the last ", early_in_a_row_,
          " generations within ", absl::FormatDuration(options_.crash_loop_window),
          " of its start: the next would fail too, so the job stops instead of spending the ",
          options_.max_restarts - restart_count_,
          " restarts left of max_restarts=", options_.max_restarts);
      decision.action = RestartDecision::Action::kStopThenFail;
      decision.reason = *crash_loop_message_;
      return decision;
    }
    return Charge(failure, context.now, std::move(decision));
  }
  // A report of the generation being torn down: a knock-on failure of the
  // one that stopped it, or that one itself when its report came late. Into
  // the history; before the job fails, also a candidate for the root cause.
  RestartDecision decision;
  Record(failure, decision);
  const bool failing = context.state == JobState::kRestarting && root_cause_.has_value();
  if (failing && FailedEarlier(failure, *root_cause_)) root_cause_ = failure;
  if (hang_review_.has_value() && FailedEarlier(failure, hang_review_->culprit)) {
    hang_review_->culprit = failure;
  }
  return decision;
}

RestartDecision RestartPolicy::DecideKnockOn(const FailureInfo& failure, const LostPeer& lost,
                                             const RestartContext& context) {
  RestartDecision decision;
  // The loss comes first in the history: it is what the dashboard and the
  // scheduler should see as the cause.
  FailureInfo cause = NodeFailure(
      lost.node_id, context.generation, lost.since,
      lost.stream_closed
          ? absl::StrCat("the session of node '", lost.node_id,
                         "' closed (its agent died or was cut off) while its workers of "
                         "generation ",
                         context.generation, " ran")
          : absl::StrCat("node '", lost.node_id, "' went silent (no heartbeat for ",
                         absl::FormatDuration(lost.silent_for),
                         ": cut off or frozen) while its workers of generation ",
                         context.generation, " ran"));
  Record(cause, decision);
  FailureInfo knock_on = failure;
  knock_on.set_message(
      Utf8Prefix(absl::StrCat("knock-on of losing node '", lost.node_id, "'",
                              failure.message().empty() ? "" : ": ", failure.message()),
                 options_.max_message_length));
  Record(knock_on, decision);
  decision.action = RestartDecision::Action::kRestart;
  decision.cause = RestartCause::NODE_LOSS;
  decision.reason =
      absl::StrCat(cause.message(), "; ", FailureSentence(failure),
                   " after it (a knock-on failure): restarting without node '", lost.node_id,
                   "' unless it resumes; the restart budget is not charged");
  return decision;
}

RestartDecision RestartPolicy::Charge(const FailureInfo& failure, absl::Time now,
                                      RestartDecision decision) {
  const std::string what = FailureSentence(failure);
  const int max = options_.max_restarts;
  if (restart_count_ < max && failure.hang()) {
    // The first hang reported is often not the one that stalled the others:
    // every rank blocked behind a stopped or stuck one goes silent too, and
    // the agents race. Stop every worker first, taking each node's evidence
    // (a process found stopped, the oldest heartbeat), and name the restart's
    // cause once the barrier completes (ConcludeStop).
    ++restart_count_;
    hang_review_ = HangReview{failure, now};
    decision.action = RestartDecision::Action::kReviewHang;
    decision.charged = true;
    decision.reason = absl::StrCat("a hang was reported (", what,
                                   "); stopping every worker to find the rank that hung first");
    return decision;
  }
  if (restart_count_ < max) {
    ++restart_count_;
    decision.action = RestartDecision::Action::kRestart;
    decision.cause = RestartCause::WORKER_FAILURE;
    decision.charged = true;
    decision.reason = absl::StrCat(what, "; restart ", restart_count_, " of ", max);
    return decision;
  }
  // The budget is spent, but the first report need not be the first
  // failure: when a worker dies, its peers fail a moment later on the broken
  // collective (or hang in it), and any of their reports may arrive first.
  // Stop every worker, taking the reports that come in meanwhile, and fail
  // with the earliest (ConcludeStop).
  root_cause_ = failure;
  decision.action = RestartDecision::Action::kStopThenFail;
  decision.reason = absl::StrCat(what, "; the restart budget (max_restarts=", max,
                                 ") is spent: stopping every worker");
  return decision;
}

void RestartPolicy::Record(const FailureInfo& failure, RestartDecision& decision) {
  // Ordered by failure time, not by arrival: the reports of one generation
  // race each other from different nodes.
  failures_.insert(std::upper_bound(failures_.begin(), failures_.end(), failure, FailedEarlier),
                   failure);
  if (static_cast<int>(failures_.size()) > options_.max_retained_failures) {
    failures_.erase(failures_.begin());
  }
  // Worker output is the bulk of a failure: the newest few keep it.
  const int keep = std::max(options_.max_failures_with_logs, 0);
  for (int i = 0; i + keep < static_cast<int>(failures_.size()); ++i) {
    failures_[i].clear_stderr_tail();
    failures_[i].clear_traceback();
  }
  decision.recorded.push_back(failure);
}

bool RestartPolicy::CrashLoop(const FailureInfo& failure, const RestartContext& context) {
  if (options_.crash_loop_generations <= 0) return false;
  const bool early = !failure.hang() && context.running_since != absl::Time() &&
                     context.now - context.running_since <= options_.crash_loop_window;
  if (!early) {
    early_in_a_row_ = 0;
    early_signature_.clear();
    return false;
  }
  // The same way: what the worker said and how it ended, whichever rank.
  const std::string signature =
      absl::StrCat(failure.exit_code(), "/", failure.signal(), "/", failure.message());
  const bool continues = early_in_a_row_ > 0 && signature == early_signature_ &&
                         context.generation == early_generation_ + 1;
  early_in_a_row_ = continues ? early_in_a_row_ + 1 : 1;
  early_signature_ = signature;
  early_generation_ = context.generation;
  return early_in_a_row_ >= options_.crash_loop_generations;
}

StopOutcome RestartPolicy::ConcludeStop() {
  StopOutcome outcome;
  if (hang_review_.has_value()) {
    // Every member's reports are in: the restart names the culprit, and is
    // dated from when it began.
    const HangReview review = *std::move(hang_review_);
    hang_review_.reset();
    outcome.named_restart = StopOutcome::NamedRestart{
        review.culprit.hang() ? RestartCause::HANG : RestartCause::WORKER_FAILURE,
        absl::StrCat(FailureSentence(review.culprit), "; restart ", restart_count_, " of ",
                     options_.max_restarts),
        review.began};
  }
  if (root_cause_.has_value()) {
    outcome.fail_with = root_cause_;
    outcome.fail_message =
        crash_loop_message_.has_value()
            ? *crash_loop_message_
            : absl::StrCat(FailureSentence(*root_cause_),
                           "; the restart budget (max_restarts=", options_.max_restarts,
                           ") is spent");
  }
  return outcome;
}

void RestartPolicy::Finish(std::optional<FailureInfo> root_cause) {
  root_cause_ = std::move(root_cause);
  hang_review_.reset();
}

}  // namespace ddp::rendezvous
