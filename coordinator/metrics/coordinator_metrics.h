#ifndef DDP_COORDINATOR_METRICS_COORDINATOR_METRICS_H_
#define DDP_COORDINATOR_METRICS_COORDINATOR_METRICS_H_

// Every metric of the coordinator, in Prometheus' text format for /metrics
// (prometheus-cpp). Recorders (RPC interceptor, store commits, job events)
// update the registry as things happen; Scrape adds the state read at scrape
// time. Names follow Prometheus' conventions with a ddp_ prefix; docs/
// operations.md lists them with the alerts they are for.
//
// Thread-safety: thread-safe.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/commit/state_store.h"
#include "coordinator/metrics/job_metrics.h"
#include "coordinator/metrics/rpc_metrics.h"
#include "coordinator/rendezvous/job.h"
#include "prometheus/registry.h"

namespace ddp::metrics {

// What Scrape reads from the running coordinator.
struct ScrapeState {
  std::vector<v1::Job> jobs;  // live ones with their nodes
  int64_t kv_revision = 0;
  int64_t kv_keys = 0;
  int64_t kv_leases = 0;
  int64_t kv_watchers = 0;
  int64_t job_watchers = 0;
  int64_t sessions_open = 0;  // agent Session streams not yet ended
  // Heartbeats over UDP (coordinator --heartbeat-udp); absent when off.
  struct HeartbeatDatagrams {
    int64_t accepted = 0;
    int64_t dropped = 0;
    int64_t refused = 0;
    int64_t acks = 0;
    int64_t overflowed = 0;  // dropped unread: the receive queue was full
    int64_t states_taken = 0;     // states datagrams whose worker states the core took
    int64_t states_deferred = 0;  // not at their stream point: the agent sends them again
  };
  std::optional<HeartbeatDatagrams> heartbeat_datagrams;
  bool writes_accepted = true;  // false: fail-stopped after a storage error
  // Bytes of the SQLite database on disk (coordinator.db and its -wal);
  // absent with --store etcd:// (etcd reports its own).
  std::optional<int64_t> database_bytes;
  // Leader changes seen (ClusterStatus.leader_changes); absent without etcd.
  std::optional<int64_t> leader_changes;
  // The fleet's ledger: nodes by state ("ready", "cordoned", "quarantined"),
  // and every incident recorded per node id (ddp_nodes, ddp_node_incidents_total).
  std::vector<std::pair<std::string, int64_t>> nodes_by_state;
  std::vector<std::pair<std::string, int64_t>> node_incidents;
};

class CoordinatorMetrics {
 public:
  explicit CoordinatorMetrics(const Clock& clock, JobMetricsOptions jobs = {});

  RpcMetrics& rpc() { return rpc_; }
  JobMetrics& jobs() { return jobs_; }
  // What the composition root wires in: the interceptor that records every
  // RPC (grpc::ServerBuilder), and the observer of the rendezvous core's
  // events (RendezvousServiceOptions::on_events).
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcInterceptorFactory() {
    return rpc_.InterceptorFactory();
  }
  void OnJobEvents(const std::vector<rendezvous::JobEvent>& events) { jobs_.OnEvents(events); }
  // One durable commit of the commit loop: its transaction time (fsync
  // included) and what it carried.
  void ObserveCommit(const commit::StateBatch& batch, absl::Duration took);
  // One fsync of the SQLite store, apart from the commit around it: `file`
  // is "wal" (a commit), "database" (a checkpoint) or "other".
  void ObserveFsync(absl::string_view file, absl::Duration took);

  // The text exposition of every metric.
  std::string Scrape(const ScrapeState& state);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  RpcMetrics rpc_;
  JobMetrics jobs_;
  prometheus::Family<prometheus::Histogram>& commit_seconds_;
  prometheus::Family<prometheus::Histogram>& commit_writes_;
  prometheus::Family<prometheus::Histogram>& fsync_seconds_;
  // The series the commit thread observes on every commit, looked up once
  // (Family::Add builds and hashes a label map on every call).
  prometheus::Histogram& commits_;
  prometheus::Histogram& kv_writes_;
  prometheus::Histogram& job_writes_;
  prometheus::Histogram& wal_fsyncs_;
  prometheus::Histogram& database_fsyncs_;
  const absl::Time started_;
  const Clock& clock_;
};

}  // namespace ddp::metrics

#endif  // DDP_COORDINATOR_METRICS_COORDINATOR_METRICS_H_
