#ifndef DDP_COORDINATOR_RENDEZVOUS_JOB_TIME_H_
#define DDP_COORDINATOR_RENDEZVOUS_JOB_TIME_H_

// Where a job's time went, from its events: the one account of training and
// lost time. Job keeps one for the API (ddp.v1.Job.time, which ddpctl and the
// dashboard show), JobMetrics one per job for its counters and gauges.
//
// A run's time is cut into phases by its events:
//
//   rendezvous  from the job's creation, or a restart's begin (kRestarting),
//               to the next generation's assignment pushed (kGenerationOpened),
//               or to the job's end when none opened: stopping the workers,
//               waiting for nodes, starting.
//   training    from a generation's start to its first failure (a worker's
//               failure time, a hang's last heartbeat or activity; a member
//               lost), else to its end (kRestarting, kJobFinished) or now.
//   detection   from that first failure to the restart or the job's end: the
//               hang itself, its detection and the stop.
//   work lost   part of training: a generation that ended by a restart or by
//   since       the job's failure loses the work from its last checkpoint
//   checkpoint  (the workers' report_checkpoint, carried by the ending event's
//               last_checkpoint) to the end of its training. Once the job
//               reported a checkpoint, a generation without one loses all its
//               training. A job that never reported one loses none this way
//               (its checkpoints are unknown). A success or a cancel loses none.
//
// Lost time is rendezvous + detection + work lost; effective training is
// training less work lost. Each generation's entry holds the downtime before
// it (the previous generation's detection and the rendezvous that led to it);
// the downtime after the last generation is an entry of generation 0.
//
// Thread-safety: not thread-safe (its owner serializes).

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "coordinator/rendezvous/job_types.h"
#include "ddp/v1/jobs.pb.h"

namespace ddp::rendezvous {

// Time by kind (see the file comment).
struct JobTimeTotals {
  absl::Duration training;  // effective: less the work lost since checkpoints
  absl::Duration rendezvous;
  absl::Duration detection;
  absl::Duration work_lost;
  absl::Duration lost() const { return rendezvous + detection + work_lost; }
};

class JobTimeLedger {
 public:
  // One generation's time and the downtime before it.
  struct GenerationEntry {
    Generation generation = 0;  // 0: the downtime after the last generation
    absl::Time started;
    std::optional<absl::Time> ended;
    std::string ended_by;  // a restart cause's name or a final state's
    absl::Duration detection;
    absl::Duration rendezvous;
    absl::Duration training;  // gross: work_lost is part of it
    absl::Duration work_lost;
    std::optional<absl::Time> last_checkpoint;
    int64_t last_checkpoint_step = 0;
    std::optional<absl::Time> first_failure;
    bool after_restart = false;  // a restart led to it (not the job's first)
  };

  // Keeps the newest `max_generations` entries (older ones stay in the totals).
  explicit JobTimeLedger(int max_generations);
  JobTimeLedger() : JobTimeLedger(64) {}

  // The job's next event, in index order. The first event starts the account.
  void Add(const JobEvent& event);

  // The phases that ended (a generation's training and work lost at its end,
  // detection at the restart, rendezvous at the next start or the job's end).
  const JobTimeTotals& closed() const { return closed_; }
  // Everything until `now`: the phase under way counted to `now` (to the
  // job's end once it finished).
  JobTimeTotals TotalsAt(absl::Time now) const;
  // Generations in order, the phase under way counted to `now`; the downtime
  // after the last one as an entry of generation 0 when there is some.
  std::deque<GenerationEntry> GenerationsAt(absl::Time now) const;
  // The API's form of the two above (ddp.v1.JobTime).
  v1::JobTime ToProto(absl::Time now) const;

  // The entries held (closed phases only; no generation-0 entry).
  const std::deque<GenerationEntry>& generations() const { return generations_; }
  std::optional<absl::Time> finished_at() const { return finished_at_; }

 private:
  enum class Phase { kRendezvous, kTraining, kEnded };

  // The running generation ends at `at`, by `ended_by`: its training stops at
  // its first failure (the rest is detection); `loses_work`: the work since
  // its last checkpoint is lost.
  void EndGeneration(absl::Time at, const std::string& ended_by, bool loses_work,
                     const JobEvent& event);
  // When the running generation's training stops, seen at `at`.
  absl::Time TrainingEnd(absl::Time at) const;

  int max_generations_;
  bool started_ = false;
  Phase phase_ = Phase::kRendezvous;
  absl::Time since_;                         // start of the phase under way
  std::optional<absl::Time> first_failure_;  // of the running generation
  bool reports_checkpoints_ = false;
  bool restarted_ = false;  // a restart began since the last generation opened
  // Downtime since the last generation ended (before the next one).
  absl::Duration pending_detection_;
  absl::Duration pending_rendezvous_;
  std::deque<GenerationEntry> generations_;
  int omitted_ = 0;
  JobTimeTotals closed_;
  std::optional<absl::Time> finished_at_;
};

}  // namespace ddp::rendezvous

#endif  // DDP_COORDINATOR_RENDEZVOUS_JOB_TIME_H_
