#include "coordinator/rendezvous/job_time.h"

#include <algorithm>
#include <utility>

namespace ddp::rendezvous {
namespace {

absl::Duration NonNegative(absl::Duration d) { return std::max(absl::ZeroDuration(), d); }

int64_t Ms(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

int64_t UnixMs(std::optional<absl::Time> t) { return t ? absl::ToUnixMillis(*t) : 0; }

// kJobFinished's message starts with the final state's name (Job::Finish).
std::string FinalState(const JobEvent& event) {
  const size_t colon = event.message().find(':');
  return event.message().substr(0, colon);
}

}  // namespace

JobTimeLedger::JobTimeLedger(int max_generations)
    : max_generations_(std::max(1, max_generations)) {}

absl::Time JobTimeLedger::TrainingEnd(absl::Time at) const {
  if (!first_failure_) return at;
  return std::clamp(*first_failure_, since_, std::max(since_, at));
}

void JobTimeLedger::EndGeneration(absl::Time at, const std::string& ended_by, bool loses_work,
                                  const JobEvent& event) {
  at = std::max(at, since_);
  const absl::Time training_end = TrainingEnd(at);
  GenerationEntry& entry = generations_.back();
  entry.ended = at;
  entry.ended_by = ended_by;
  entry.training = training_end - since_;
  entry.first_failure = first_failure_;
  if (event.last_checkpoint_unix_ms() != 0) {
    reports_checkpoints_ = true;
    entry.last_checkpoint = absl::FromUnixMillis(event.last_checkpoint_unix_ms());
    entry.last_checkpoint_step = event.last_checkpoint_step();
  }
  if (loses_work && reports_checkpoints_) {
    const absl::Time from =
        entry.last_checkpoint ? std::clamp(*entry.last_checkpoint, since_, training_end) : since_;
    entry.work_lost = training_end - from;
  }
  closed_.training += entry.training - entry.work_lost;
  closed_.work_lost += entry.work_lost;
  const absl::Duration detection = at - training_end;
  closed_.detection += detection;
  pending_detection_ += detection;
  phase_ = Phase::kRendezvous;
  since_ = at;
  first_failure_.reset();
}

void JobTimeLedger::Add(const JobEvent& event) {
  if (phase_ == Phase::kEnded) return;  // a repeated end
  if (!started_) {
    started_ = true;
    since_ = EventTime(event);
  }
  switch (event.type()) {
    case JobEvent::WORKER_FAILED: {
      if (phase_ != Phase::kTraining) break;
      const absl::Time at = event.has_failure() ? FailureTime(event.failure()) : EventTime(event);
      if (!first_failure_ || at < *first_failure_) first_failure_ = at;
      break;
    }
    case JobEvent::NODE_LOST:
      if (phase_ == Phase::kTraining && !first_failure_) first_failure_ = EventTime(event);
      break;
    case JobEvent::RESTARTING:
      if (phase_ == Phase::kTraining) {
        EndGeneration(EventTime(event), RestartCauseName(event.restart_cause()),
                      /*loses_work=*/true, event);
      }
      restarted_ = true;
      break;
    case JobEvent::GENERATION_OPENED: {
      if (phase_ == Phase::kTraining) {  // not seen: a restart without its event
        EndGeneration(EventTime(event), "restart", /*loses_work=*/true, event);
      }
      const absl::Time at = std::max(EventTime(event), since_);
      const absl::Duration rendezvous = at - since_;
      closed_.rendezvous += rendezvous;
      GenerationEntry entry;
      entry.generation = event.generation();
      entry.started = at;
      entry.detection = pending_detection_;
      entry.rendezvous = pending_rendezvous_ + rendezvous;
      entry.after_restart = restarted_;
      generations_.push_back(std::move(entry));
      while (static_cast<int>(generations_.size()) > max_generations_) {
        generations_.pop_front();
        ++omitted_;
      }
      pending_detection_ = absl::ZeroDuration();
      pending_rendezvous_ = absl::ZeroDuration();
      restarted_ = false;
      phase_ = Phase::kTraining;
      since_ = at;
      first_failure_.reset();
      break;
    }
    case JobEvent::JOB_FINISHED: {
      const std::string state = FinalState(event);
      if (phase_ == Phase::kTraining) {
        EndGeneration(EventTime(event), state,
                      /*loses_work=*/state == JobStateName(JobState::kFailed), event);
      } else {
        const absl::Duration rendezvous = NonNegative(EventTime(event) - since_);
        closed_.rendezvous += rendezvous;
        pending_rendezvous_ += rendezvous;
      }
      since_ = std::max(since_, EventTime(event));
      phase_ = Phase::kEnded;
      finished_at_ = since_;
      break;
    }
    case JobEvent::JOB_CREATED:
    case JobEvent::NODE_JOINED:
    case JobEvent::JOB_UPDATED:
    case JobEvent::NODE_DRAINING:
      break;
  }
}

JobTimeTotals JobTimeLedger::TotalsAt(absl::Time now) const {
  JobTimeTotals totals = closed_;
  if (!started_ || phase_ == Phase::kEnded) return totals;
  now = std::max(now, since_);
  if (phase_ == Phase::kTraining) {
    const absl::Time training_end = TrainingEnd(now);
    totals.training += training_end - since_;
    totals.detection += now - training_end;
  } else {
    totals.rendezvous += now - since_;
  }
  return totals;
}

std::deque<JobTimeLedger::GenerationEntry> JobTimeLedger::GenerationsAt(absl::Time now) const {
  std::deque<GenerationEntry> out = generations_;
  if (!started_) return out;
  now = std::max(now, since_);
  absl::Duration detection = pending_detection_;
  absl::Duration rendezvous = pending_rendezvous_;
  if (phase_ == Phase::kTraining) {
    GenerationEntry& running = out.back();
    const absl::Time training_end = TrainingEnd(now);
    running.training = training_end - since_;
    running.first_failure = first_failure_;
    detection += now - training_end;
  } else if (phase_ == Phase::kRendezvous) {
    rendezvous += now - since_;
  }
  if (detection > absl::ZeroDuration() || rendezvous > absl::ZeroDuration() ||
      phase_ == Phase::kRendezvous) {
    GenerationEntry next;
    next.started = since_;
    if (phase_ == Phase::kEnded) {
      next.ended = finished_at_;
      next.ended_by = "job ended";
    }
    next.detection = detection;
    next.rendezvous = rendezvous;
    next.after_restart = restarted_;
    out.push_back(std::move(next));
  }
  return out;
}

v1::JobTime JobTimeLedger::ToProto(absl::Time now) const {
  v1::JobTime out;
  for (const GenerationEntry& e : GenerationsAt(now)) {
    v1::GenerationTime* g = out.add_generations();
    g->set_generation(e.generation);
    if (e.generation != 0) g->set_started_unix_ms(absl::ToUnixMillis(e.started));
    g->set_ended_unix_ms(UnixMs(e.ended));
    g->set_ended_by(e.ended_by);
    g->set_detection_ms(Ms(e.detection));
    g->set_rendezvous_ms(Ms(e.rendezvous));
    g->set_training_ms(Ms(e.training));
    g->set_work_lost_ms(Ms(e.work_lost));
    g->set_last_checkpoint_unix_ms(UnixMs(e.last_checkpoint));
    g->set_last_checkpoint_step(e.last_checkpoint_step);
    g->set_first_failure_unix_ms(UnixMs(e.first_failure));
  }
  out.set_generations_omitted(omitted_);
  const JobTimeTotals totals = TotalsAt(now);
  out.set_training_ms(Ms(totals.training));
  out.set_detection_ms(Ms(totals.detection));
  out.set_rendezvous_ms(Ms(totals.rendezvous));
  out.set_work_lost_ms(Ms(totals.work_lost));
  return out;
}

}  // namespace ddp::rendezvous
