#include "coordinator/metrics/coordinator_metrics.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/version.h"
#include "coordinator/metrics/process_metrics.h"
#include "prometheus/text_serializer.h"

namespace ddp::metrics {
namespace {

const prometheus::Histogram::BucketBoundaries& CommitSecondsBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};
  return *buckets;
}

const prometheus::Histogram::BucketBoundaries& CommitWritesBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  return *buckets;
}

prometheus::MetricFamily OneGauge(std::string name, std::string help, double value) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = prometheus::MetricType::Gauge;
  prometheus::ClientMetric metric;
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
  return family;
}

// A gauge or counter with one sample per value of one label.
prometheus::MetricFamily OneLabelFamily(
    std::string name, std::string help, prometheus::MetricType type, const std::string& label,
    const std::vector<std::pair<std::string, int64_t>>& values) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  for (const auto& [label_value, value] : values) {
    prometheus::ClientMetric metric;
    metric.label.push_back({label, label_value});
    if (type == prometheus::MetricType::Counter) {
      metric.counter.value = static_cast<double>(value);
    } else {
      metric.gauge.value = static_cast<double>(value);
    }
    family.metric.push_back(std::move(metric));
  }
  return family;
}

// ddp_nodes{state} and ddp_node_incidents_total{node}: the fleet's ledger.
void AddFleet(const ScrapeState& state, std::vector<prometheus::MetricFamily>* families) {
  families->push_back(OneLabelFamily(
      "ddp_nodes",
      "Nodes the coordinator knows, by state: ready, cordoned (by an operator), quarantined (by "
      "--quarantine-after); a cordoned or quarantined node joins no job",
      prometheus::MetricType::Gauge, "state", state.nodes_by_state));
  families->push_back(OneLabelFamily(
      "ddp_node_incidents_total",
      "What went wrong on each node, across jobs: worker failures, hangs, lost leases, failed "
      "health checks (ddpctl nodes get NODE lists them)",
      prometheus::MetricType::Counter, "node", state.node_incidents));
}

// ddp_heartbeat_datagrams_total{result}, ddp_heartbeat_datagram_acks_total and
// ddp_heartbeat_datagram_states_total{result}.
void AddHeartbeatDatagrams(const ScrapeState::HeartbeatDatagrams& d,
                           std::vector<prometheus::MetricFamily>* families) {
  families->push_back(OneLabelFamily(
      "ddp_heartbeat_datagrams_total",
      "Heartbeat datagrams received over UDP, by result: accepted (the core took it), dropped "
      "(malformed, bad MAC, replayed or of a closed session: a steady rate of them is "
      "misconfiguration or an attack), refused (the core refused it: the agent moved to its "
      "stream), overflowed (dropped unread by the kernel: the receive queue was full, the "
      "coordinator is overloaded and lets no node's silence count meanwhile)",
      prometheus::MetricType::Counter, "result",
      {{"accepted", d.accepted},
       {"dropped", d.dropped},
       {"refused", d.refused},
       {"overflowed", d.overflowed}}));
  prometheus::MetricFamily acks;
  acks.name = "ddp_heartbeat_datagram_acks_total";
  acks.help = "Ack datagrams sent to agents (each renews an agent's lease, or refuses)";
  acks.type = prometheus::MetricType::Counter;
  prometheus::ClientMetric metric;
  metric.counter.value = static_cast<double>(d.acks);
  acks.metric.push_back(std::move(metric));
  families->push_back(std::move(acks));
  families->push_back(OneLabelFamily(
      "ddp_heartbeat_datagram_states_total",
      "Worker states received in states datagrams, by result: taken (at their point of the "
      "agent's stream), deferred (the stream was ahead or behind: the agent sends them again "
      "with its next heartbeat; a deferred share near 1 means states keep missing their point)",
      prometheus::MetricType::Counter, "result",
      {{"taken", d.states_taken}, {"deferred", d.states_deferred}}));
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(const Clock& clock, JobMetricsOptions jobs)
    : registry_(std::make_shared<prometheus::Registry>()),
      rpc_(*registry_),
      jobs_(*registry_, clock, jobs),
      commit_seconds_(prometheus::BuildHistogram()
                          .Name("ddp_store_commit_duration_seconds")
                          .Help("One durable commit of the commit loop: one transaction "
                                "of the store (coordinator.db with its fsync, or etcd), KV "
                                "and jobs")
                          .Register(*registry_)),
      commit_writes_(prometheus::BuildHistogram()
                         .Name("ddp_store_commit_batch_writes")
                         .Help("What one commit held, by part: kv (key events) or jobs "
                               "(changes of one job each)")
                         .Register(*registry_)),
      fsync_seconds_(prometheus::BuildHistogram()
                         .Name("ddp_store_fsync_duration_seconds")
                         .Help("One fsync of the SQLite store, apart from the commit around "
                               "it, by file: wal (every commit), database (checkpoints), "
                               "other. With etcd, etcd's own "
                               "etcd_disk_wal_fsync_duration_seconds")
                         .Register(*registry_)),
      commits_(commit_seconds_.Add({}, CommitSecondsBuckets())),
      kv_writes_(commit_writes_.Add({{"part", "kv"}}, CommitWritesBuckets())),
      job_writes_(commit_writes_.Add({{"part", "jobs"}}, CommitWritesBuckets())),
      wal_fsyncs_(fsync_seconds_.Add({{"file", "wal"}}, CommitSecondsBuckets())),
      database_fsyncs_(fsync_seconds_.Add({{"file", "database"}}, CommitSecondsBuckets())),
      started_(clock.Now()),
      clock_(clock) {}

void CoordinatorMetrics::ObserveCommit(const commit::StateBatch& batch, absl::Duration took) {
  commits_.Observe(absl::ToDoubleSeconds(took));
  if (batch.kv && !batch.kv->events.empty()) {
    kv_writes_.Observe(static_cast<double>(batch.kv->events.size()));
  }
  if (!batch.jobs.empty()) job_writes_.Observe(static_cast<double>(batch.jobs.size()));
}

void CoordinatorMetrics::ObserveFsync(absl::string_view file, absl::Duration took) {
  const double seconds = absl::ToDoubleSeconds(took);
  if (file == "wal") {
    wal_fsyncs_.Observe(seconds);
  } else if (file == "database") {
    database_fsyncs_.Observe(seconds);
  } else {
    fsync_seconds_.Add({{"file", std::string(file)}}, CommitSecondsBuckets()).Observe(seconds);
  }
}

std::string CoordinatorMetrics::Scrape(const ScrapeState& state) {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& family : jobs_.Collect(state.jobs)) families.push_back(std::move(family));
  families.push_back(OneGauge("ddp_coordinator_leader",
                              "1 on the coordinator that serves (the leader, or the only one), "
                              "0 on a standby",
                              1));
  families.push_back(OneGauge("ddp_kv_revision", "Current revision of the key-value store",
                              static_cast<double>(state.kv_revision)));
  families.push_back(
      OneGauge("ddp_kv_keys", "Keys in the key-value store", static_cast<double>(state.kv_keys)));
  families.push_back(
      OneGauge("ddp_kv_leases", "Leases alive", static_cast<double>(state.kv_leases)));
  families.push_back(OneGauge("ddp_kv_watchers", "Key-value watch streams open",
                              static_cast<double>(state.kv_watchers)));
  families.push_back(OneGauge("ddp_job_watchers", "WatchJob streams open",
                              static_cast<double>(state.job_watchers)));
  families.push_back(OneGauge("ddp_sessions_open", "Agent Session streams open (registered or not)",
                              static_cast<double>(state.sessions_open)));
  AddFleet(state, &families);
  if (state.heartbeat_datagrams.has_value()) {
    AddHeartbeatDatagrams(*state.heartbeat_datagrams, &families);
  }
  families.push_back(OneGauge("ddp_store_writes_accepted",
                              "1 while the stores accept writes; 0 after a storage failure "
                              "(fail-stop until restarted: alert on it)",
                              state.writes_accepted ? 1 : 0));
  if (state.database_bytes.has_value()) {
    families.push_back(OneGauge("ddp_store_database_bytes",
                                "Size of the SQLite database on disk, coordinator.db and its "
                                "write-ahead log (-wal)",
                                static_cast<double>(*state.database_bytes)));
  }
  if (state.leader_changes.has_value()) {
    prometheus::MetricFamily changes;
    changes.name = "ddp_coordinator_leader_changes_seen_total";
    changes.help =
        "Leader changes this coordinator has seen since it started (each coordinator seen "
        "elected, itself included; --store etcd:// only)";
    changes.type = prometheus::MetricType::Counter;
    prometheus::ClientMetric metric;
    metric.counter.value = static_cast<double>(*state.leader_changes);
    changes.metric.push_back(std::move(metric));
    families.push_back(std::move(changes));
  }
  prometheus::MetricFamily build =
      OneGauge("ddp_build_info",
               "Always 1; the labels name the version and the build mode of this binary", 1);
  build.metric[0].label = {{"mode", BuildMode()}, {"version", kVersion}};
  families.push_back(std::move(build));
  if (absl::StatusOr<ProcessSnapshot> process = ReadSelfProcessSnapshot(); process.ok()) {
    for (auto& family : ProcessFamilies(*process)) families.push_back(std::move(family));
  }
  families.push_back(OneGauge("ddp_start_time_seconds",
                              "When this coordinator process started (Unix time)",
                              absl::ToDoubleSeconds(started_ - absl::UnixEpoch())));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace ddp::metrics
