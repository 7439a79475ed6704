#ifndef DDP_COORDINATOR_SERVER_COORDINATOR_SERVER_H_
#define DDP_COORDINATOR_SERVER_COORDINATOR_SERVER_H_

// The composition root of the coordinator: wires, in dependency order,
//   data dir lock -> SqliteStateStore (DATA_DIR/coordinator.db: KV and jobs;
//                    a jobs.db of an earlier release is imported)
//                 -> CommitLoop (the one commit pipeline) -> KvStore and
//                    JobServices (rendezvous registry restored from the same
//                    file, session + job services) join it -> loop started
//     -> gRPC services -> gRPC server
//     -> HTTP listener (health, REST gateway onto the gRPC server in process),
// and tears them down in reverse: agent sessions end first (UNAVAILABLE, so
// agents resume against the restarted coordinator), then the KV store, then
// the loop commits what is left.
//
// Lifecycle:  Start --> serving --Shutdown (or destructor)--> stopped
//
// Thread-safety: port()/address() any time while serving; Shutdown
// is idempotent and may be called from any thread (not from an RPC handler).

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/tls_files.h"
#include "coordinator/auth/authorizer.h"
#include "coordinator/commit/commit_loop.h"
#include "coordinator/commit/node_ledger_participant.h"
#include "coordinator/commit/state_store.h"
#include "coordinator/ha/cluster_service.h"
#include "coordinator/http/http_listener.h"
#include "coordinator/http/rest_gateway.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/rpc/async_stream_queues.h"
#include "coordinator/rpc/grpc_kv_service.h"
#include "coordinator/rpc/grpc_node_service.h"
#include "coordinator/server/data_dir_lock.h"
#include "coordinator/session/job_services.h"
#include "coordinator/storage/sqlite_sync_timer.h"
#include "grpcpp/server.h"

namespace ddp::server {

// The one database of a data dir (KV and jobs).
inline constexpr char kStateDatabase[] = "coordinator.db";

// The data dir when none is given (--data-dir's default; README and
// docs/operations.md say the same): relative to the working directory, so a
// first run works without root.
inline constexpr char kDefaultDataDir[] = "./ddp-coordinator-data";

struct CoordinatorServerOptions {
  std::string bind_address = "0.0.0.0";
  int port = 29400;  // 0: any free port (see CoordinatorServer::port())
  std::string data_dir = kDefaultDataDir;
  // Where the state lives: empty, SQLite in data_dir (coordinator.db);
  // "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]", an etcd 3.4 cluster (the
  // data dir then holds only the LOCK; HaCoordinator elects the one
  // coordinator that serves it and hands Start the fenced store).
  std::string store;
  // ClusterService's answer; null: this coordinator alone (role SINGLE).
  ha::ClusterService::Status cluster_status;
  kv::KvStoreOptions kv;
  // How often KV leases and waits expire (--tick-interval-ms): the commit
  // loop's ticker runs at the shorter of this and the rendezvous tick.
  absl::Duration kv_tick_interval = absl::Milliseconds(50);
  session::JobServicesOptions jobs;
  // The fleet's ledger (quarantine policy, bounds); its on_change is set here.
  fleet::NodeLedgerOptions fleet;
  // With jobs.heartbeat_udp: the UDP port of heartbeats; -1, the gRPC port's
  // number; 0, any free one (see heartbeat_udp_port()).
  int heartbeat_udp_port = -1;
  // The HTTP listener (REST API, /metrics, health checks); nullopt: none (and
  // no metrics are recorded). Its bind_address is ignored: it binds where
  // gRPC does.
  std::optional<http::HttpListenerOptions> http;
  // TLS on the gRPC port (and mTLS with a client CA); off when empty. The
  // files are watched and reloaded every tls_reload_interval.
  TlsServerFiles tls;
  absl::Duration tls_reload_interval = absl::Seconds(10);
  // Authorization (coordinator/auth): every call must carry this token as
  // "authorization: Bearer TOKEN"; empty: off. Never logged.
  std::string admin_token;
  // How long Shutdown lets in-flight unary calls finish before cancelling them.
  absl::Duration shutdown_grace = absl::Seconds(2);
  const Clock* clock = nullptr;  // null: SteadyWallClock (the wall clock, never stepping)
};

class CoordinatorServer {
 public:
  // Locks the data dir, opens the database (or takes `store`, already open),
  // and starts serving.
  // Errors: INVALID_ARGUMENT bad port; FAILED_PRECONDITION data dir locked by
  // another coordinator (message names the dir and the holder's pid);
  // ALREADY_EXISTS the listen address is in use; UNAVAILABLE cannot listen or
  // storage failure; DATA_LOSS a database is corrupt, missing, empty or foreign
  // in an initialised data dir (see storage/data_dir_identity.h).
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      CoordinatorServerOptions options, std::unique_ptr<commit::StateStore> store = nullptr);
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // The bound port (the actual one when options.port was 0).
  int port() const { return port_; }
  // "host:port" as bound, e.g. "0.0.0.0:29400".
  std::string address() const;
  // The bound UDP port of heartbeats; 0 without jobs.heartbeat_udp.
  int heartbeat_udp_port() const { return job_services_->heartbeat_udp_port(); }
  // The bound HTTP port; 0 when HTTP is off.
  int http_port() const { return http_listener_ ? http_listener_->port() : 0; }

  // Stops HTTP (ends event streams), ends agent sessions and job watches
  // (UNAVAILABLE), refuses new work, ends
  // watch streams and waits with UNAVAILABLE, commits queued writes, stops the gRPC server and all
  // threads, closes the database, unlocks.
  void Shutdown();

  // SQLite in the data dir (identity checked, an earlier release's jobs.db
  // imported; its fsyncs reported to `sync_timing`), or etcd
  // (options.store). The caller holds the data dir's lock.
  static absl::StatusOr<std::unique_ptr<commit::StateStore>> OpenStateStore(
      const CoordinatorServerOptions& opts, storage::SqliteSyncTiming sync_timing = {});

 private:
  // The REST gateway's options: with authorization on, event streams are
  // checked before their headers go out.
  http::RestGatewayOptions RestOptions() const;
  explicit CoordinatorServer(CoordinatorServerOptions options) : options_(std::move(options)) {}
  absl::Status StartHttp();
  absl::Status Readiness();
  metrics::ScrapeState ReadScrapeState();

  const CoordinatorServerOptions options_;
  std::unique_ptr<DataDirLock> lock_;
  // Before the stores: their commit observers record into it.
  std::unique_ptr<metrics::CoordinatorMetrics> metrics_;
  std::unique_ptr<commit::StateStore> state_store_;
  // Shut down explicitly before its participants (the KV store, the job
  // services) go, and destroyed after them.
  std::unique_ptr<commit::CommitLoop> commit_loop_;
  std::unique_ptr<kv::KvStore> kv_store_;
  std::unique_ptr<commit::NodeLedgerParticipant> fleet_;  // the loop's too
  std::unique_ptr<auth::Authorizer> authorizer_;          // before the services that use it
  std::unique_ptr<rpc::GrpcKvService> kv_service_;
  std::unique_ptr<ha::ClusterService> cluster_service_;
  std::unique_ptr<rpc::GrpcNodeService> node_service_;
  std::unique_ptr<session::JobServices> job_services_;
  // The long-lived streams (KV watches; agents' sessions unless
  // --session-queues 0): after the services whose calls it serves, stopped
  // after the gRPC server.
  std::unique_ptr<rpc::AsyncStreamQueues> stream_queues_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<http::RestGateway> rest_gateway_;
  std::unique_ptr<http::HttpListener> http_listener_;
  int port_ = 0;
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace ddp::server

#endif  // DDP_COORDINATOR_SERVER_COORDINATOR_SERVER_H_
