#ifndef DDP_COORDINATOR_METRICS_JOB_METRICS_H_
#define DDP_COORDINATOR_METRICS_JOB_METRICS_H_

// Job metrics, from the rendezvous core's events (as they leave, after they
// are durable) and from the jobs' state at scrape time.
//
// From events (counters and histograms in the registry):
//   ddp_generations_opened_total, ddp_restarts_total{cause},
//   ddp_worker_failures_total, ddp_node_losses_total,
//   ddp_recovery_duration_seconds   first failure of a generation -> the next
//                                   generation's assignment pushed (its
//                                   workers start),
//   ddp_rendezvous_duration_seconds job created or restart begun -> the
//                                   generation's assignment pushed,
//   ddp_training_seconds_total, ddp_lost_seconds_total{kind}   where jobs'
//                                   time went, as JobTimeLedger counts it
//                                   (rendezvous/job_time.h): effective
//                                   training; lost by kind: rendezvous (job
//                                   created or restart begun -> a generation
//                                   started), detection (a generation's first
//                                   failure, a hang's last activity -> its
//                                   restart), since_checkpoint (the work from
//                                   a generation's last reported checkpoint to
//                                   its failure). Counted as phases end.
// At scrape time (Collect): jobs by state; per live job (job label, at most
// max_labeled_jobs jobs, by id) generation, restarts and budget, members and
// spares, the oldest heartbeat, stragglers, training and lost seconds and the effective
// training ratio; agents connected; a histogram of heartbeat ages. A finished
// job keeps its restarts, training and lost seconds and ratio series for
// finished_retention after its end (its run's figures, frozen at the end),
// and across a coordinator restart (rebuilt from its retained events).
//
// Across a coordinator restart or failover (RestoreCounts, ReplayRetained): the event counters
// (generations opened, restarts by cause, worker failures, node losses) start from the store's
// counts of every event it ever committed, so they go on from the same totals; the per-job training
// and lost time, the two histograms and the seconds totals are rebuilt by replaying the events the
// jobs retain (a job removed or rerun, or events beyond the retention, are not in those).
//
// Thread-safety: thread-safe.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/rendezvous/job.h"
#include "coordinator/rendezvous/job_time.h"
#include "coordinator/rendezvous/job_types.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace ddp::metrics {

struct JobMetricsOptions {
  // Live jobs that get series with a job label; more are counted in
  // ddp_job_series_omitted (bounded cardinality).
  int max_labeled_jobs = 100;
  // How long a finished job keeps its per-job series.
  absl::Duration finished_retention = absl::Hours(24);
};

class JobMetrics {
 public:
  JobMetrics(prometheus::Registry& registry, const Clock& clock, JobMetricsOptions options);

  // The core's events in the order they happened (the commit loop's delivery thread).
  void OnEvents(const std::vector<rendezvous::JobEvent>& events);

  // Starting from what the store kept (see the file comment), before the
  // first OnEvents: the counts of every committed event
  // (JobStateStore::LoadEventCounts), once; then each restored job's retained
  // events in index order (ReplayRetained, job by job). An event OnEvents
  // delivers later that was replayed is not taken again.
  void RestoreCounts(const rendezvous::JobEventCounts& counts);
  void ReplayRetained(const std::vector<rendezvous::JobEvent>& events);

  // Scrape-time families from `jobs` (live ones with their nodes).
  std::vector<prometheus::MetricFamily> Collect(const std::vector<v1::Job>& jobs);

 private:
  // Where one job's time goes, and how much of it the counters hold.
  struct Track {
    rendezvous::JobTimeLedger ledger;
    rendezvous::JobTimeTotals counted;
  };

  // The counter that counts events of `type` (RESTARTING: by `cause`);
  // null for the types no counter counts.
  prometheus::Counter* CounterOf(rendezvous::JobEventType type, rendezvous::RestartCause cause);
  // Follows `event` in its job's ledger: the two histograms at a generation's
  // start, the seconds counters as phases end (not the event counters).
  void TrackEvent(const rendezvous::JobEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock& clock_;
  const JobMetricsOptions options_;
  prometheus::Counter& generations_opened_;
  prometheus::Family<prometheus::Counter>& restarts_;
  prometheus::Counter& worker_failures_;
  prometheus::Counter& node_losses_;
  prometheus::Histogram& recovery_;
  prometheus::Histogram& rendezvous_;
  prometheus::Counter& training_seconds_;
  prometheus::Counter& lost_rendezvous_seconds_;
  prometheus::Counter& lost_detection_seconds_;
  prometheus::Counter& lost_since_checkpoint_seconds_;
  absl::Mutex mu_;
  std::map<std::string, Track> tracks_ ABSL_GUARDED_BY(mu_);
  // Per restored job, the last event Restore replayed (until a later one
  // arrives).
  std::map<std::string, int64_t> replayed_through_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::metrics

#endif  // DDP_COORDINATOR_METRICS_JOB_METRICS_H_
