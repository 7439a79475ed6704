#include "coordinator/metrics/job_metrics.h"

#include <algorithm>

namespace ddp::metrics {
namespace {

using rendezvous::JobEvent;
using rendezvous::JobEventType;
using rendezvous::JobState;

const prometheus::Histogram::BucketBoundaries& RecoveryBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 120, 300, 600, 1800};
  return *buckets;
}

prometheus::MetricFamily Gauge(std::string name, std::string help) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = prometheus::MetricType::Gauge;
  return family;
}

// One family, whichever kind asks first (prometheus-cpp returns the family
// registered under the name).
prometheus::Family<prometheus::Counter>& LostSeconds(prometheus::Registry& registry) {
  return prometheus::BuildCounter()
      .Name("ddp_lost_seconds_total")
      .Help(
          "Time jobs lost, by kind: rendezvous (job created or restart begun -> a generation "
          "started), detection (a generation's first failure, a hang's last activity -> its "
          "restart), since_checkpoint (work from a generation's last reported checkpoint to "
          "its failure); phases that ended")
      .Register(registry);
}

void AddSample(prometheus::MetricFamily& family,
               std::vector<prometheus::ClientMetric::Label> labels, double value) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

}  // namespace

JobMetrics::JobMetrics(prometheus::Registry& registry, const Clock& clock,
                       JobMetricsOptions options)
    : clock_(clock),
      options_(options),
      generations_opened_(prometheus::BuildCounter()
                              .Name("ddp_generations_opened_total")
                              .Help("Generations whose assignment was pushed (workers started)")
                              .Register(registry)
                              .Add({})),
      restarts_(prometheus::BuildCounter()
                    .Name("ddp_restarts_total")
                    .Help("Group-wide restarts by cause: worker_failure, hang, node_loss, "
                          "scale, operator")
                    .Register(registry)),
      worker_failures_(prometheus::BuildCounter()
                           .Name("ddp_worker_failures_total")
                           .Help("Worker failures reported (exits, signals, hangs)")
                           .Register(registry)
                           .Add({})),
      node_losses_(prometheus::BuildCounter()
                       .Name("ddp_node_losses_total")
                       .Help("Nodes that left a job: lost, left, excluded, replaced")
                       .Register(registry)
                       .Add({})),
      recovery_(prometheus::BuildHistogram()
                    .Name("ddp_recovery_duration_seconds")
                    .Help("From the first failure of a generation to the next generation's "
                          "workers started")
                    .Register(registry)
                    .Add({}, RecoveryBuckets())),
      rendezvous_(prometheus::BuildHistogram()
                      .Name("ddp_rendezvous_duration_seconds")
                      .Help("From a job's creation or a restart's start to the generation's "
                            "assignment pushed")
                      .Register(registry)
                      .Add({}, RecoveryBuckets())),
      training_seconds_(prometheus::BuildCounter()
                            .Name("ddp_training_seconds_total")
                            .Help("Time jobs spent with a running generation (phases that "
                                  "ended)")
                            .Register(registry)
                            .Add({})),
      lost_rendezvous_seconds_(LostSeconds(registry).Add({{"kind", "rendezvous"}})),
      lost_detection_seconds_(LostSeconds(registry).Add({{"kind", "detection"}})),
      lost_since_checkpoint_seconds_(LostSeconds(registry).Add({{"kind", "since_checkpoint"}})) {
  for (auto cause : {rendezvous::RestartCause::WORKER_FAILURE, rendezvous::RestartCause::HANG,
                     rendezvous::RestartCause::NODE_LOSS, rendezvous::RestartCause::SCALE,
                     rendezvous::RestartCause::OPERATOR, rendezvous::RestartCause::DRAIN}) {
    restarts_.Add({{"cause", rendezvous::RestartCauseName(cause)}});
  }
}

void JobMetrics::OnEvents(const std::vector<rendezvous::JobEvent>& events) {
  absl::MutexLock lock(&mu_);
  for (const rendezvous::JobEvent& event : events) {
    if (!replayed_through_.empty()) {
      auto replayed = replayed_through_.find(event.job_id());
      if (replayed != replayed_through_.end()) {
        if (event.index() <= replayed->second) continue;
        replayed_through_.erase(replayed);
      }
    }
    if (prometheus::Counter* counter = CounterOf(event.type(), event.restart_cause())) {
      counter->Increment();
    }
    TrackEvent(event);
  }
}

void JobMetrics::ReplayRetained(const std::vector<rendezvous::JobEvent>& events) {
  absl::MutexLock lock(&mu_);
  for (const rendezvous::JobEvent& event : events) {
    TrackEvent(event);  // not counted: the counters come from RestoreCounts
    int64_t& through = replayed_through_[event.job_id()];
    through = std::max(through, event.index());
  }
}

void JobMetrics::RestoreCounts(const rendezvous::JobEventCounts& counts) {
  for (const auto& [key, n] : counts.counts) {
    if (prometheus::Counter* counter = CounterOf(key.first, key.second)) {
      counter->Increment(static_cast<double>(n));
    }
  }
}

prometheus::Counter* JobMetrics::CounterOf(JobEventType type, rendezvous::RestartCause cause) {
  switch (type) {
    case JobEvent::GENERATION_OPENED:
      return &generations_opened_;
    case JobEvent::WORKER_FAILED:
      return &worker_failures_;
    case JobEvent::NODE_LOST:
      return &node_losses_;
    case JobEvent::RESTARTING:
      return &restarts_.Add({{"cause", rendezvous::RestartCauseName(cause)}});
    default:
      return nullptr;
  }
}

void JobMetrics::TrackEvent(const rendezvous::JobEvent& event) {
  auto [it, inserted] = tracks_.try_emplace(event.job_id());
  if (!inserted && it->second.ledger.finished_at() && event.type() != JobEvent::JOB_FINISHED) {
    it->second = Track{};  // the id runs again: a new run's figures
  }
  Track& track = it->second;
  track.ledger.Add(event);
  if (event.type() == JobEvent::GENERATION_OPENED && !track.ledger.generations().empty()) {
    const auto& opened = track.ledger.generations().back();
    rendezvous_.Observe(absl::ToDoubleSeconds(opened.rendezvous));
    if (opened.after_restart) {
      recovery_.Observe(absl::ToDoubleSeconds(opened.detection + opened.rendezvous));
    }
  }
  const rendezvous::JobTimeTotals& closed = track.ledger.closed();
  auto add = [](prometheus::Counter& counter, absl::Duration now, absl::Duration& counted) {
    if (now > counted) counter.Increment(absl::ToDoubleSeconds(now - counted));
    counted = now;
  };
  add(training_seconds_, closed.training, track.counted.training);
  add(lost_rendezvous_seconds_, closed.rendezvous, track.counted.rendezvous);
  add(lost_detection_seconds_, closed.detection, track.counted.detection);
  add(lost_since_checkpoint_seconds_, closed.work_lost, track.counted.work_lost);
}

std::vector<prometheus::MetricFamily> JobMetrics::Collect(const std::vector<v1::Job>& jobs) {
  const absl::Time now = clock_.Now();
  auto by_state = Gauge("ddp_jobs", "Jobs the coordinator holds, by state");
  std::map<JobState, int> counts;
  for (JobState state :
       {JobState::kWaiting, JobState::kStarting, JobState::kRunning, JobState::kRestarting,
        JobState::kSucceeded, JobState::kFailed, JobState::kCancelled}) {
    counts[state] = 0;
  }
  for (const auto& job : jobs) {
    if (auto state = rendezvous::JobStateFromProto(job.state()); state.ok()) ++counts[*state];
  }
  for (const auto& [state, count] : counts)
    AddSample(by_state, {{"state", rendezvous::JobStateName(state)}}, count);

  auto generation = Gauge("ddp_job_generation", "Current generation of a live job");
  auto restarts = Gauge("ddp_job_restarts",
                        "Restarts charged to a job's budget (live, or finished within the "
                        "retention)");
  auto budget = Gauge("ddp_job_max_restarts", "A live job's restart budget (max_restarts)");
  auto nodes = Gauge("ddp_job_nodes", "Nodes of a live job by role: member or spare");
  auto oldest = Gauge("ddp_job_heartbeat_age_max_seconds",
                      "Age of the oldest heartbeat among a live job's connected nodes");
  auto training = Gauge("ddp_job_training_seconds",
                        "Time a job spent with a running generation until its first failure, "
                        "less the work lost since its last checkpoint "
                        "(since it was created, as far as its retained events tell; live, or "
                        "finished within the retention)");
  auto lost = Gauge("ddp_job_lost_seconds",
                    "Time a job lost: rendezvous and restarts, from a generation's first "
                    "failure (a hang's last activity) to its restart, and the work since its "
                    "last reported checkpoint (ddp_lost_seconds_total's kinds)");
  auto ratio = Gauge("ddp_job_effective_training_ratio",
                     "training / (training + lost) of a job: its effective training time");
  auto stragglers = Gauge("ddp_job_stragglers",
                          "Ranks of a live job's running generation a quarter or more slower "
                          "than the median, from their progress reports or, reporting none, "
                          "their CPU (stragglers.h)");
  auto connected = Gauge("ddp_agents_connected", "Agents with an open session, all live jobs");
  auto omitted =
      Gauge("ddp_job_series_omitted", "Live jobs beyond the cap that have no per-job series");
  prometheus::MetricFamily ages;
  ages.name = "ddp_heartbeat_age_seconds";
  ages.help = "Age of each connected agent's last heartbeat at scrape time";
  ages.type = prometheus::MetricType::Histogram;
  static const std::vector<double> kAgeBounds = {0.25, 0.5, 1, 2, 3, 5, 10, 30};
  prometheus::ClientMetric age_histogram;
  age_histogram.histogram.bucket.resize(kAgeBounds.size() + 1);
  for (size_t i = 0; i < kAgeBounds.size(); ++i) {
    age_histogram.histogram.bucket[i].upper_bound = kAgeBounds[i];
  }
  age_histogram.histogram.bucket.back().upper_bound = std::numeric_limits<double>::infinity();

  int agents = 0;
  int labeled = 0;
  int skipped = 0;
  absl::MutexLock lock(&mu_);
  // Finished jobs' tracks past their retention, or whose job is gone.
  std::map<std::string, bool> listed;
  for (const auto& job : jobs) listed[job.job_id()] = true;
  for (auto it = tracks_.begin(); it != tracks_.end();) {
    const std::optional<absl::Time> finished_at = it->second.ledger.finished_at();
    const bool expired = finished_at && (now - *finished_at > options_.finished_retention ||
                                         listed.count(it->first) == 0);
    it = expired ? tracks_.erase(it) : std::next(it);
  }
  for (const auto& job : jobs) {
    if (rendezvous::IsTerminal(job.state())) {
      auto it = tracks_.find(job.job_id());
      if (it == tracks_.end() || !it->second.ledger.finished_at()) continue;
      if (labeled >= options_.max_labeled_jobs) {
        ++skipped;
        continue;
      }
      ++labeled;
      const rendezvous::JobTimeTotals totals = it->second.ledger.TotalsAt(now);
      const std::vector<prometheus::ClientMetric::Label> label = {{"job_id", job.job_id()}};
      AddSample(restarts, label, job.restart_count());
      AddSample(training, label, absl::ToDoubleSeconds(totals.training));
      AddSample(lost, label, absl::ToDoubleSeconds(totals.lost()));
      const double total = absl::ToDoubleSeconds(totals.training + totals.lost());
      AddSample(ratio, label, total > 0 ? absl::ToDoubleSeconds(totals.training) / total : 0);
      continue;
    }
    double oldest_age = 0;
    const int members = job.members_size();
    const int spares = job.spares_size();
    int slow = 0;
    std::vector<const v1::Member*> nodes_of_job;
    for (const auto& node : job.members()) nodes_of_job.push_back(&node);
    for (const auto& node : job.spares()) nodes_of_job.push_back(&node);
    for (const v1::Member* node : nodes_of_job) {
      for (const auto& p : node->progress()) slow += p.straggler() ? 1 : 0;
      if (!node->connected()) continue;
      ++agents;
      const double age = std::max(0.0, node->heartbeat_age_ms() / 1000.0);
      oldest_age = std::max(oldest_age, age);
      ++age_histogram.histogram.sample_count;
      age_histogram.histogram.sample_sum += age;
      for (auto& bucket : age_histogram.histogram.bucket) {
        if (age <= bucket.upper_bound) ++bucket.cumulative_count;
      }
    }
    if (labeled >= options_.max_labeled_jobs) {
      ++skipped;
      continue;
    }
    ++labeled;
    auto [it, inserted] = tracks_.try_emplace(job.job_id());
    Track& track = it->second;
    if (inserted) {  // restored without retained events: account from now
      rendezvous::JobEvent from_now;
      from_now.set_job_id(job.job_id());
      rendezvous::SetEventTime(now, &from_now);
      from_now.set_generation(job.generation());
      from_now.set_type(job.state() == v1::RUNNING ? JobEvent::GENERATION_OPENED
                                                   : JobEvent::JOB_CREATED);
      track.ledger.Add(from_now);
    }
    const rendezvous::JobTimeTotals totals = track.ledger.TotalsAt(now);
    const absl::Duration train = totals.training;
    const absl::Duration wasted = totals.lost();
    const std::vector<prometheus::ClientMetric::Label> label = {{"job_id", job.job_id()}};
    AddSample(generation, label, static_cast<double>(job.generation()));
    AddSample(restarts, label, job.restart_count());
    AddSample(budget, label, job.settings().max_restarts());
    AddSample(nodes, {{"job_id", job.job_id()}, {"role", "member"}}, members);
    AddSample(nodes, {{"job_id", job.job_id()}, {"role", "spare"}}, spares);
    AddSample(oldest, label, oldest_age);
    AddSample(stragglers, label, slow);
    AddSample(training, label, absl::ToDoubleSeconds(train));
    AddSample(lost, label, absl::ToDoubleSeconds(wasted));
    const double total = absl::ToDoubleSeconds(train + wasted);
    AddSample(ratio, label, total > 0 ? absl::ToDoubleSeconds(train) / total : 0);
  }
  AddSample(connected, {}, agents);
  AddSample(omitted, {}, skipped);
  ages.metric.push_back(std::move(age_histogram));
  return {std::move(by_state), std::move(generation), std::move(restarts),   std::move(budget),
          std::move(nodes),    std::move(oldest),     std::move(stragglers), std::move(training),
          std::move(lost),     std::move(ratio),      std::move(connected),  std::move(omitted),
          std::move(ages)};
}

}  // namespace ddp::metrics
