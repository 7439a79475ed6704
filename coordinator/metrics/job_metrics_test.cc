#include "coordinator/metrics/job_metrics.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::metrics {
namespace {

using rendezvous::JobEvent;
using rendezvous::JobEventType;
using ::testing::HasSubstr;
using ::testing::Not;

class JobMetricsTest : public ::testing::Test {
 protected:
  JobEvent Event(JobEventType type, int64_t at_seconds) {
    JobEvent event;
    event.set_job_id("train");
    event.set_type(type);
    rendezvous::SetEventTime(start_ + absl::Seconds(at_seconds), &event);
    return event;
  }

  // A running job as the core lists it: a member with a straggler, a spare.
  v1::Job LiveJob(const std::string& id) {
    v1::Job job;
    job.set_job_id(id);
    job.set_state(v1::RUNNING);
    job.set_generation(2);
    job.set_restart_count(1);
    job.mutable_settings()->set_max_restarts(3);
    v1::Member* member = job.add_members();
    member->set_node_id("n0");
    member->set_group_rank(0);
    member->set_connected(true);
    member->set_heartbeat_age_ms(1500);
    member->add_progress()->set_straggler(true);
    member->add_progress();
    v1::Member* spare = job.add_spares();
    spare->set_node_id("n1");
    spare->set_group_rank(-1);
    spare->set_connected(true);
    spare->set_heartbeat_age_ms(200);
    return job;
  }

  const absl::Time start_ = absl::FromUnixSeconds(1'700'000'000);
  FakeClock clock_{start_};
};

TEST_F(JobMetricsTest, RestartsRecoveryAndEffectiveTrainingTime) {
  CoordinatorMetrics metrics(clock_);
  JobEvent failed = Event(JobEvent::WORKER_FAILED, 100);
  rendezvous::SetFailureTime(start_ + absl::Seconds(99), failed.mutable_failure());
  JobEvent restarting = Event(JobEvent::RESTARTING, 100);
  restarting.set_restart_cause(rendezvous::RestartCause::WORKER_FAILURE);
  metrics.jobs().OnEvents({Event(JobEvent::JOB_CREATED, 0), Event(JobEvent::GENERATION_OPENED, 10),
                           failed, restarting, Event(JobEvent::GENERATION_OPENED, 105)});
  clock_.Advance(absl::Seconds(200));
  ScrapeState state;
  state.jobs.push_back(LiveJob("train"));
  const std::string text = metrics.Scrape(state);
  EXPECT_THAT(text, HasSubstr("ddp_generations_opened_total 2"));
  EXPECT_THAT(text, HasSubstr("ddp_restarts_total{cause=\"worker_failure\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddp_restarts_total{cause=\"hang\"} 0"));
  EXPECT_THAT(text, HasSubstr("ddp_worker_failures_total 1"));
  // Recovery from the failure's own time (99 s) to the next generation (105 s).
  EXPECT_THAT(text, HasSubstr("ddp_recovery_duration_seconds_sum 6"));
  // Rendezvous: 0 -> 10 s and 100 -> 105 s.
  EXPECT_THAT(text, HasSubstr("ddp_rendezvous_duration_seconds_sum 15"));
  EXPECT_THAT(text, HasSubstr("ddp_rendezvous_duration_seconds_count 2"));
  // Training 10..99 (the failure) and 105..200 = 184 s; lost 0..10 and
  // 99..105 = 16 s.
  EXPECT_THAT(text, HasSubstr("ddp_job_training_seconds{job_id=\"train\"} 184"));
  EXPECT_THAT(text, HasSubstr("ddp_job_lost_seconds{job_id=\"train\"} 16"));
  EXPECT_THAT(text, HasSubstr("ddp_job_effective_training_ratio{job_id=\"train\"} 0.92"));
  EXPECT_THAT(text, HasSubstr("ddp_job_nodes{job_id=\"train\",role=\"member\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddp_job_nodes{job_id=\"train\",role=\"spare\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddp_job_heartbeat_age_max_seconds{job_id=\"train\"} 1.5"));
  EXPECT_THAT(text, HasSubstr("ddp_job_stragglers{job_id=\"train\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddp_agents_connected 2"));
  EXPECT_THAT(text, HasSubstr("ddp_heartbeat_age_seconds_bucket{le=\"0.25\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddp_heartbeat_age_seconds_bucket{le=\"2\"} 2"));
  EXPECT_THAT(text, HasSubstr("ddp_jobs{state=\"running\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddp_jobs{state=\"failed\"} 0"));
}

TEST_F(JobMetricsTest, FinishedJob_KeepsItsSeriesForTheRetention_CapBoundsLabels) {
  CoordinatorMetrics metrics(
      clock_, JobMetricsOptions{.max_labeled_jobs = 2, .finished_retention = absl::Hours(24)});
  metrics.jobs().OnEvents({Event(JobEvent::JOB_CREATED, 0), Event(JobEvent::GENERATION_OPENED, 10),
                           Event(JobEvent::JOB_FINISHED, 30)});
  clock_.Advance(absl::Hours(23));
  ScrapeState state;
  v1::Job done = LiveJob("train");
  done.set_state(v1::SUCCEEDED);
  state.jobs = {done, LiveJob("a"), LiveJob("b")};
  std::string text = metrics.Scrape(state);
  // Frozen at its end: 20 s training, 10 s lost, whatever the time now.
  EXPECT_THAT(text, HasSubstr("ddp_job_training_seconds{job_id=\"train\"} 20"));
  EXPECT_THAT(text, HasSubstr("ddp_job_lost_seconds{job_id=\"train\"} 10"));
  EXPECT_THAT(text, HasSubstr("ddp_job_restarts{job_id=\"train\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("ddp_job_generation{job_id=\"train\"}")));  // live only
  EXPECT_THAT(text, HasSubstr("ddp_job_generation{job_id=\"a\"}"));
  EXPECT_THAT(text, Not(HasSubstr("job_id=\"b\"")));
  EXPECT_THAT(text, HasSubstr("ddp_job_series_omitted 1"));
  EXPECT_THAT(text, HasSubstr("ddp_training_seconds_total 20"));
  EXPECT_THAT(text, HasSubstr("ddp_lost_seconds_total{kind=\"rendezvous\"} 10"));
  EXPECT_THAT(text, HasSubstr("ddp_lost_seconds_total{kind=\"detection\"} 0"));
  EXPECT_THAT(text, HasSubstr("ddp_lost_seconds_total{kind=\"since_checkpoint\"} 0"));
  EXPECT_THAT(text, HasSubstr("ddp_jobs{state=\"succeeded\"} 1"));
  clock_.Advance(absl::Hours(2));  // past the retention
  text = metrics.Scrape(state);
  EXPECT_THAT(text, Not(HasSubstr("job_id=\"train\"")));
  EXPECT_THAT(text, HasSubstr("ddp_job_generation{job_id=\"b\"}"));
}

// A hang: the generation's training stops at the hung rank's last activity
// (its failure time), not at the restart: the hang, its detection and the
// recovery are lost.
TEST_F(JobMetricsTest, Hang_TimeFromLastActivityToNextGenerationIsLost) {
  CoordinatorMetrics metrics(clock_);
  JobEvent hung = Event(JobEvent::WORKER_FAILED, 61);
  hung.mutable_failure()->set_hang(true);
  rendezvous::SetFailureTime(start_ + absl::Seconds(50),
                             hung.mutable_failure());  // its last activity
  JobEvent restarting = Event(JobEvent::RESTARTING, 61);
  restarting.set_restart_cause(rendezvous::RestartCause::HANG);
  metrics.jobs().OnEvents({Event(JobEvent::JOB_CREATED, 0), Event(JobEvent::GENERATION_OPENED, 10),
                           hung, restarting, Event(JobEvent::GENERATION_OPENED, 70)});
  clock_.Advance(absl::Seconds(100));
  ScrapeState state;
  state.jobs.push_back(LiveJob("train"));
  const std::string text = metrics.Scrape(state);
  // Training 10..50 and 70..100; lost 0..10 and 50..70.
  EXPECT_THAT(text, HasSubstr("ddp_job_training_seconds{job_id=\"train\"} 70"));
  EXPECT_THAT(text, HasSubstr("ddp_job_lost_seconds{job_id=\"train\"} 30"));
  EXPECT_THAT(text, HasSubstr("ddp_recovery_duration_seconds_sum 20"));
}

// A job that fails with a hang: from the hang to the end is lost too.
TEST_F(JobMetricsTest, FailedByHang_TimeFromLastActivityToTheEndIsLost) {
  CoordinatorMetrics metrics(clock_);
  JobEvent hung = Event(JobEvent::WORKER_FAILED, 62);
  hung.mutable_failure()->set_hang(true);
  rendezvous::SetFailureTime(start_ + absl::Seconds(50), hung.mutable_failure());
  metrics.jobs().OnEvents({Event(JobEvent::JOB_CREATED, 0), Event(JobEvent::GENERATION_OPENED, 10),
                           hung, Event(JobEvent::JOB_FINISHED, 64)});
  ScrapeState state;
  v1::Job failed = LiveJob("train");
  failed.set_state(v1::FAILED);
  state.jobs.push_back(failed);
  const std::string text = metrics.Scrape(state);
  EXPECT_THAT(text, HasSubstr("ddp_job_training_seconds{job_id=\"train\"} 40"));
  EXPECT_THAT(text, HasSubstr("ddp_job_lost_seconds{job_id=\"train\"} 24"));
}

// A generation that fails 9 s after its last reported checkpoint loses those
// 9 s of work too (kind since_checkpoint), apart from the downtime.
TEST_F(JobMetricsTest, CheckpointBeforeFailure_WorkSinceItLostByKind) {
  CoordinatorMetrics metrics(clock_);
  JobEvent failed = Event(JobEvent::WORKER_FAILED, 40);
  rendezvous::SetFailureTime(start_ + absl::Seconds(39), failed.mutable_failure());
  JobEvent restarting = Event(JobEvent::RESTARTING, 41);
  restarting.set_restart_cause(rendezvous::RestartCause::WORKER_FAILURE);
  restarting.set_last_checkpoint_unix_ms(absl::ToUnixMillis(start_ + absl::Seconds(30)));
  metrics.jobs().OnEvents({Event(JobEvent::JOB_CREATED, 0), Event(JobEvent::GENERATION_OPENED, 10),
                           failed, restarting, Event(JobEvent::GENERATION_OPENED, 45)});
  clock_.Advance(absl::Seconds(55));
  ScrapeState state;
  state.jobs.push_back(LiveJob("train"));
  const std::string text = metrics.Scrape(state);
  EXPECT_THAT(text, HasSubstr("ddp_lost_seconds_total{kind=\"since_checkpoint\"} 9"));
  EXPECT_THAT(text, HasSubstr("ddp_lost_seconds_total{kind=\"detection\"} 2"));
  EXPECT_THAT(text, HasSubstr("ddp_lost_seconds_total{kind=\"rendezvous\"} 14"));
  EXPECT_THAT(text, HasSubstr("ddp_training_seconds_total 20"));
  // Training 10..30 and 45..55; lost 0..10, 30..45.
  EXPECT_THAT(text, HasSubstr("ddp_job_training_seconds{job_id=\"train\"} 30"));
  EXPECT_THAT(text, HasSubstr("ddp_job_lost_seconds{job_id=\"train\"} 25"));
}

// The lines of `text` of the job metrics (those built from events), in order.
std::vector<std::string> JobEventLines(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    for (const char* family :
         {"ddp_generations_opened_total", "ddp_restarts_total", "ddp_worker_failures_total",
          "ddp_node_losses_total", "ddp_recovery_duration_seconds",
          "ddp_rendezvous_duration_seconds", "ddp_training_seconds_total", "ddp_lost_seconds_total",
          "ddp_job_training_seconds", "ddp_job_lost_seconds", "ddp_job_effective_training_ratio"}) {
      if (absl::StartsWith(line, family)) out.emplace_back(line);
    }
  }
  return out;
}

class JobMetricsRestoreTest : public JobMetricsTest {
 protected:
  // Job "train": created, generation 1, a worker failure and its restart,
  // generation 2, a node lost and a free restart, generation 3.
  std::vector<JobEvent> History(const std::string& job_id) {
    std::vector<JobEvent> events;
    auto add = [&](JobEventType type, int64_t at,
                   rendezvous::RestartCause cause =
                       rendezvous::RestartCause::RESTART_CAUSE_UNSPECIFIED) {
      JobEvent event = Event(type, at);
      event.set_job_id(job_id);
      event.set_index(static_cast<int64_t>(events.size()) + 1);
      event.set_restart_cause(cause);
      if (type == JobEvent::WORKER_FAILED) {
        rendezvous::SetFailureTime(rendezvous::EventTime(event) - absl::Seconds(1),
                                   event.mutable_failure());
      }
      events.push_back(event);
    };
    add(JobEvent::JOB_CREATED, 0);
    add(JobEvent::NODE_JOINED, 1);
    add(JobEvent::GENERATION_OPENED, 10);
    add(JobEvent::WORKER_FAILED, 100);
    add(JobEvent::RESTARTING, 100, rendezvous::RestartCause::WORKER_FAILURE);
    add(JobEvent::GENERATION_OPENED, 105);
    add(JobEvent::NODE_LOST, 150);
    add(JobEvent::RESTARTING, 150, rendezvous::RestartCause::NODE_LOSS);
    add(JobEvent::GENERATION_OPENED, 153);
    return events;
  }
  static rendezvous::JobEventCounts CountsOf(const std::vector<JobEvent>& events) {
    rendezvous::JobEventCounts counts;
    for (const JobEvent& event : events) counts.Add(event);
    return counts;
  }
};

// A coordinator restart: the new process starts from the store's counts and
// the retained events, and a scrape shows what the old one showed.
TEST_F(JobMetricsRestoreTest, Restore_SameEvents_ScrapeShowsTheSameTotals) {
  const std::vector<JobEvent> history = History("train");
  CoordinatorMetrics before(clock_);
  before.jobs().OnEvents(history);
  clock_.Advance(absl::Seconds(200));
  ScrapeState state;
  state.jobs.push_back(LiveJob("train"));
  const std::vector<std::string> want = JobEventLines(before.Scrape(state));
  ASSERT_THAT(want, ::testing::Contains("ddp_restarts_total{cause=\"node_loss\"} 1"));
  ASSERT_THAT(want, ::testing::Contains("ddp_generations_opened_total 3"));

  CoordinatorMetrics after(clock_);
  after.jobs().RestoreCounts(CountsOf(history));
  after.jobs().ReplayRetained(history);
  EXPECT_EQ(JobEventLines(after.Scrape(state)), want);
}

// A job that ended before the restart keeps its series after it, frozen at
// its end, for the retention.
TEST_F(JobMetricsRestoreTest, Restore_FinishedJob_SeriesBackFrozenAtItsEnd) {
  std::vector<JobEvent> history = History("train");
  JobEvent finished = Event(JobEvent::JOB_FINISHED, 200);
  finished.set_index(static_cast<int64_t>(history.size()) + 1);
  history.push_back(finished);
  clock_.Advance(absl::Hours(1));
  CoordinatorMetrics after(clock_);
  after.jobs().RestoreCounts(CountsOf(history));
  after.jobs().ReplayRetained(history);
  ScrapeState state;
  v1::Job done = LiveJob("train");
  done.set_state(v1::SUCCEEDED);
  state.jobs.push_back(done);
  const std::string text = after.Scrape(state);
  // Training 10..99, 105..150 (the node loss), 153..200; lost 0..10, 99..105, 150..153.
  EXPECT_THAT(text, HasSubstr("ddp_job_training_seconds{job_id=\"train\"} 181"));
  EXPECT_THAT(text, HasSubstr("ddp_job_lost_seconds{job_id=\"train\"} 19"));
}

// Counters come from the counts (every committed event, a removed job's
// too); histograms and seconds from the events still retained.
TEST_F(JobMetricsRestoreTest, Restore_RemovedJobsEvents_CountedNotReplayed) {
  std::vector<JobEvent> all = History("train");
  const std::vector<JobEvent> removed = History("gone");
  all.insert(all.end(), removed.begin(), removed.end());
  CoordinatorMetrics metrics(clock_);
  metrics.jobs().RestoreCounts(CountsOf(all));
  metrics.jobs().ReplayRetained(History("train"));
  const std::string text = metrics.Scrape(ScrapeState{});
  EXPECT_THAT(text, HasSubstr("ddp_restarts_total{cause=\"worker_failure\"} 2"));
  EXPECT_THAT(text, HasSubstr("ddp_restarts_total{cause=\"node_loss\"} 2"));
  EXPECT_THAT(text, HasSubstr("ddp_restarts_total{cause=\"hang\"} 0"));
  EXPECT_THAT(text, HasSubstr("ddp_worker_failures_total 2"));
  EXPECT_THAT(text, HasSubstr("ddp_node_losses_total 2"));
  EXPECT_THAT(text, HasSubstr("ddp_generations_opened_total 6"));
  EXPECT_THAT(text, HasSubstr("ddp_rendezvous_duration_seconds_count 3"));  // train's alone
}

// Events the restored coordinator delivers after Restore: those replayed are
// not counted again, new ones are.
TEST_F(JobMetricsRestoreTest, OnEventsAfterRestore_ReplayedSkippedNewCounted) {
  std::vector<JobEvent> history = History("train");
  CoordinatorMetrics metrics(clock_);
  metrics.jobs().RestoreCounts(CountsOf(history));
  metrics.jobs().ReplayRetained(history);
  JobEvent next = Event(JobEvent::RESTARTING, 300);
  next.set_index(static_cast<int64_t>(history.size()) + 1);
  next.set_restart_cause(rendezvous::RestartCause::SCALE);
  metrics.jobs().OnEvents({history.back(), next});
  const std::string text = metrics.Scrape(ScrapeState{});
  EXPECT_THAT(text, HasSubstr("ddp_generations_opened_total 3"));
  EXPECT_THAT(text, HasSubstr("ddp_restarts_total{cause=\"scale\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddp_rendezvous_duration_seconds_count 3"));
}

TEST(RpcMetricsTest, RecordsByServiceMethodAndCode) {
  FakeClock clock;
  CoordinatorMetrics metrics(clock);
  using CallType = RpcMetrics::CallType;
  metrics.rpc().Started("/ddp.v1.KeyValueService/Put", CallType::kUnary);
  metrics.rpc().Record("/ddp.v1.KeyValueService/Put", grpc::StatusCode::OK, CallType::kUnary,
                       0.002);
  metrics.rpc().Record("/ddp.v1.KeyValueService/Get", grpc::StatusCode::NOT_FOUND, CallType::kUnary,
                       0.0001);
  metrics.rpc().Record("/ddp.v1.KeyValueService/Watch", grpc::StatusCode::CANCELLED,
                       CallType::kServerStream, 9);
  commit::StateBatch batch;
  batch.kv.emplace();
  batch.kv->events.resize(16);
  batch.jobs.resize(3);
  metrics.ObserveCommit(batch, absl::Milliseconds(3));
  const std::string text = metrics.Scrape({});
  EXPECT_THAT(
      text,
      HasSubstr(
          "ddp_rpc_requests_total{code=\"OK\",method=\"Put\",service=\"KeyValueService\"} 1"));
  EXPECT_THAT(text, HasSubstr("code=\"NOT_FOUND\",method=\"Get\""));
  EXPECT_THAT(text, HasSubstr("code=\"CANCELLED\",method=\"Watch\""));
  EXPECT_THAT(text, Not(HasSubstr("ddp_rpc_request_duration_seconds_count{method=\"Watch\"")));
  EXPECT_THAT(text, HasSubstr("ddp_store_commit_batch_writes_sum{part=\"kv\"} 16"));
  EXPECT_THAT(text, HasSubstr("ddp_store_commit_batch_writes_sum{part=\"jobs\"} 3"));
  EXPECT_THAT(text, HasSubstr("ddp_store_commit_duration_seconds_count 1"));
  // The names and labels of Grafana's gRPC dashboards.
  EXPECT_THAT(text, HasSubstr("grpc_server_started_total{grpc_method=\"Put\",grpc_service="
                              "\"ddp.v1.KeyValueService\",grpc_type=\"unary\"} 1"));
  EXPECT_THAT(text, HasSubstr("grpc_server_handled_total{grpc_code=\"NOT_FOUND\",grpc_method="
                              "\"Get\",grpc_service=\"ddp.v1.KeyValueService\",grpc_type="
                              "\"unary\"} 1"));
  EXPECT_THAT(text, HasSubstr("grpc_server_handling_seconds_count{grpc_method=\"Watch\","
                              "grpc_service=\"ddp.v1.KeyValueService\",grpc_type="
                              "\"server_stream\"} 1"));
  // Build and process metrics.
  EXPECT_THAT(text, HasSubstr("ddp_build_info{mode=\""));
  EXPECT_THAT(text, HasSubstr("process_cpu_seconds_total "));
  EXPECT_THAT(text, HasSubstr("process_open_fds "));
}

// The fleet's ledger as the scrape shows it: nodes by state (a gauge) and
// incidents per node (a counter).
TEST_F(JobMetricsTest, Fleet_NodesByStateAndIncidentsPerNode) {
  CoordinatorMetrics metrics(clock_);
  ScrapeState state;
  state.nodes_by_state = {{"ready", 3}, {"quarantined", 1}};
  state.node_incidents = {{"n7", 2}};
  const std::string text = metrics.Scrape(state);
  EXPECT_THAT(text, HasSubstr("# TYPE ddp_nodes gauge"));
  EXPECT_THAT(text, HasSubstr("ddp_nodes{state=\"ready\"} 3"));
  EXPECT_THAT(text, HasSubstr("ddp_nodes{state=\"quarantined\"} 1"));
  EXPECT_THAT(text, HasSubstr("# TYPE ddp_node_incidents_total counter"));
  EXPECT_THAT(text, HasSubstr("ddp_node_incidents_total{node=\"n7\"} 2"));
}

}  // namespace
}  // namespace ddp::metrics
