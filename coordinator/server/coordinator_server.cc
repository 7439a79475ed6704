#include "coordinator/server/coordinator_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_tls.h"
#include "common/listen_address.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/commit/kv_participant.h"
#include "coordinator/http/dashboard.h"
#include "coordinator/http/health.h"
#include "coordinator/rpc/call_auth.h"
#include "coordinator/rpc/malformed_request.h"
#include "coordinator/storage/data_dir_identity.h"
#include "coordinator/storage/etcd/etcd_state_store.h"
#include "coordinator/storage/etcd/etcd_store_spec.h"
#include "coordinator/storage/sqlite_snapshot.h"
#include "coordinator/storage/sqlite_state_store.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace ddp::server {
namespace {

// The second file earlier releases kept the jobs in (imported once, then
// renamed jobs.db.imported).
constexpr char kLegacyJobsDatabase[] = "jobs.db";

// Room for the largest valid request (a Put of max key + max value, or a Wait
// of max_keys_per_request maximal keys) plus protobuf framing.
int MaxMessageBytes(const kv::KvLimits& limits) {
  const size_t put = limits.max_key_bytes + limits.max_value_bytes;
  const size_t wait = limits.max_keys_per_request * (limits.max_key_bytes + 8);
  const size_t cas = limits.max_key_bytes + 2 * limits.max_value_bytes;
  const size_t largest = std::max({put, wait, cas}) + 64 * 1024;
  return static_cast<int>(std::min<size_t>(largest, 1ull << 30));
}

// The job metrics of a coordinator that starts on stored state go on from
// it: the store's counts of every committed event, and each restored job's
// retained events (before the commit loop runs, so nothing is delivered in
// between).
absl::Status RestoreJobMetrics(const commit::StateStore& store, const session::JobServices& jobs,
                               metrics::JobMetrics& metrics) {
  DDP_ASSIGN_OR_RETURN(rendezvous::JobEventCounts counts, store.LoadEventCounts());
  metrics.RestoreCounts(counts);
  DDP_ASSIGN_OR_RETURN(std::vector<v1::Job> restored, jobs.ListJobs(/*include_past_runs=*/false));
  for (const v1::Job& job : restored) {
    if (job.first_event_index() == 0) continue;
    DDP_ASSIGN_OR_RETURN(std::vector<rendezvous::JobEvent> events,
                         jobs.EventsSince(job.job_id(), job.first_event_index() - 1,
                                          std::numeric_limits<int>::max()));
    metrics.ReplayRetained(events);
  }
  return absl::OkStatus();
}

bool IsLoopback(const std::string& address) {
  return address == "localhost" || address == "::1" || address == "[::1]" ||
         address.rfind("127.", 0) == 0;
}

// Bytes of the SQLite database of `data_dir` on disk: coordinator.db and its
// write-ahead log.
int64_t SqliteDatabaseBytes(const std::string& data_dir) {
  int64_t bytes = 0;
  for (const char* suffix : {"", "-wal"}) {
    struct stat file {};
    const std::string path = absl::StrCat(data_dir, "/", kStateDatabase, suffix);
    if (::stat(path.c_str(), &file) == 0) bytes += static_cast<int64_t>(file.st_size);
  }
  return bytes;
}

}  // namespace

http::RestGatewayOptions CoordinatorServer::RestOptions() const {
  http::RestGatewayOptions options;
  if (!authorizer_->enabled()) return options;
  const auth::Authorizer* authorizer = authorizer_.get();
  options.authorize_stream = [authorizer](const std::string& method,
                                          const google::protobuf::Message& request,
                                          const std::string& authorization) {
    // The job a request names: its job_id, or the KV namespace.
    std::string target;
    for (const char* name : {"job_id", "namespace"}) {
      const auto* field = request.GetDescriptor()->FindFieldByName(name);
      if (field != nullptr && field->type() == google::protobuf::FieldDescriptor::TYPE_STRING) {
        target = request.GetReflection()->GetString(request, field);
      }
    }
    return authorizer->Authorize(authorizer->Resolve(authorization), method, target);
  };
  return options;
}

absl::StatusOr<std::unique_ptr<commit::StateStore>> CoordinatorServer::OpenStateStore(
    const CoordinatorServerOptions& opts, storage::SqliteSyncTiming sync_timing) {
  if (!opts.store.empty()) {
    DDP_ASSIGN_OR_RETURN(storage::EtcdStoreSpec spec, storage::ParseEtcdStoreSpec(opts.store));
    absl::StatusOr<std::unique_ptr<storage::EtcdStateStore>> etcd =
        storage::EtcdStateStore::Open(storage::EtcdTarget(spec.endpoints), spec.prefix);
    if (!etcd.ok()) {
      return absl::Status(etcd.status().code(), absl::StrCat("cannot open --store=", opts.store,
                                                             ": ", etcd.status().message()));
    }
    DDP_LOG(INFO) << "state in etcd at " << opts.store;
    return std::unique_ptr<commit::StateStore>(std::move(etcd).value());
  }
  // Refuse a data dir whose databases went missing, empty or foreign: serving
  // them would look like an empty store. A dir of an earlier release also has
  // jobs.db, imported below.
  std::vector<std::string> databases = {kStateDatabase};
  const std::string db_path = absl::StrCat(opts.data_dir, "/", kStateDatabase);
  const std::string jobs_path = absl::StrCat(opts.data_dir, "/", kLegacyJobsDatabase);
  DDP_ASSIGN_OR_RETURN(bool legacy, storage::ExpectsLegacyJobsDatabase(db_path, jobs_path));
  if (legacy) databases.push_back(kLegacyJobsDatabase);
  DDP_RETURN_IF_ERROR(storage::EnsureDataDirIdentity(opts.data_dir, databases).status());
  kv::SqliteKvBackendOptions sqlite_options;
  sqlite_options.sync_timing = std::move(sync_timing);
  absl::StatusOr<std::unique_ptr<storage::SqliteStateStore>> state =
      storage::SqliteStateStore::Open(db_path, std::move(sqlite_options));
  if (!state.ok()) {
    return absl::Status(state.status().code(),
                        absl::StrCat("cannot open ", db_path, ": ", state.status().message()));
  }
  if (legacy) DDP_RETURN_IF_ERROR((*state)->ImportJobsDatabase(jobs_path).status());
  return std::unique_ptr<commit::StateStore>(std::move(state).value());
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    CoordinatorServerOptions options, std::unique_ptr<commit::StateStore> store_given) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port ", options.port, " is out of range; give 0 (any free port) to 65535"));
  }
  absl::Status tls = CheckTlsServerFiles(options.tls);
  if (!tls.ok()) return tls;
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer(std::move(options)));
  const CoordinatorServerOptions& opts = server->options_;
  // Deadlines (heartbeat timeouts, KV lease TTLs) must not jump when the
  // wall clock is set: a forward step would declare every node lost at once.
  const Clock& clock = opts.clock != nullptr ? *opts.clock : SteadyWallClock::Get();

  DDP_ASSIGN_OR_RETURN(std::unique_ptr<DataDirLock> lock, DataDirLock::Acquire(opts.data_dir));
  server->lock_ = std::move(lock);

  // The metrics first: the store reports its fsyncs to them.
  if (opts.http.has_value()) {
    server->metrics_ = std::make_unique<metrics::CoordinatorMetrics>(clock);
  }
  if (store_given != nullptr) {
    server->state_store_ = std::move(store_given);
  } else {
    storage::SqliteSyncTiming sync_timing;
    if (server->metrics_ != nullptr) {
      sync_timing.on_sync = [recorder = server->metrics_.get()](storage::SyncedFile file,
                                                                absl::Duration took) {
        recorder->ObserveFsync(storage::SyncedFileName(file), took);
      };
    }
    DDP_ASSIGN_OR_RETURN(server->state_store_, OpenStateStore(opts, std::move(sync_timing)));
  }
  kv::KvStoreOptions kv_options = opts.kv;
  server->authorizer_ = std::make_unique<auth::Authorizer>(opts.admin_token);
  session::JobServicesOptions job_options = opts.jobs;
  job_options.session.authorizer = server->authorizer_.get();
  job_options.jobs.authorizer = server->authorizer_.get();
  commit::CommitLoopOptions loop_options;
  // One ticker for both: KV leases and waits at --tick-interval-ms, job
  // timeouts at least every rendezvous tick (100 ms), whichever is shorter.
  loop_options.tick_interval = opts.jobs.rendezvous.tick_interval;
  if (opts.kv_tick_interval > absl::ZeroDuration()) {
    loop_options.tick_interval = std::min(loop_options.tick_interval, opts.kv_tick_interval);
  }
  loop_options.retry_interval = opts.jobs.rendezvous.write_retry_interval;
  loop_options.clock = &clock;
  if (server->metrics_ != nullptr) {
    metrics::CoordinatorMetrics* recorder = server->metrics_.get();
    loop_options.on_commit = [recorder](const commit::StateBatch& batch, absl::Duration took) {
      recorder->ObserveCommit(batch, took);
    };
  }

  server->commit_loop_ = std::make_unique<commit::CommitLoop>(*server->state_store_, loop_options);
  DDP_RETURN_IF_ERROR(fleet::ValidateQuarantinePolicy(opts.fleet.quarantine));
  auto fleet = commit::NodeLedgerParticipant::Open(*server->commit_loop_, clock, opts.fleet);
  if (!fleet.ok()) {
    return absl::Status(
        fleet.status().code(),
        absl::StrCat("cannot restore the fleet's node records: ", fleet.status().message()));
  }
  server->fleet_ = *std::move(fleet);
  job_options.session.fleet = &server->fleet_->ledger();
  // The jobs' durable events: the fleet's ledger (incidents), and the
  // metrics.
  job_options.rendezvous.on_events =
      [ledger = &server->fleet_->ledger(),
       recorder = server->metrics_.get()](const std::vector<rendezvous::JobEvent>& e) {
        ledger->RecordEvents(e);
        if (recorder != nullptr) recorder->OnJobEvents(e);
      };
  auto store = commit::OpenKvStore(*server->commit_loop_, clock, kv_options);
  if (!store.ok()) return store.status();
  server->kv_store_ = *std::move(store);
  rpc::GrpcKvServiceOptions kv_service_options;
  kv_service_options.authorizer = server->authorizer_.get();
  if (opts.store.empty()) {
    // Snapshots next to the database: one file system, so the copy's space
    // is checked where it will be; a name no start of the coordinator reads.
    kv_service_options.snapshot = [data_dir = opts.data_dir]() -> absl::StatusOr<std::string> {
      static std::atomic<int64_t> next{0};
      const std::string copy =
          absl::StrCat(data_dir, "/snapshot-", getpid(), "-", next.fetch_add(1), ".db.partial");
      DDP_RETURN_IF_ERROR(
          storage::CopySqliteDatabase(absl::StrCat(data_dir, "/", kStateDatabase), copy));
      return copy;
    };
  }
  server->kv_service_ =
      std::make_unique<rpc::GrpcKvService>(*server->kv_store_, kv_service_options);

  // After an I/O error the store takes no writes until a restart: scheduler
  // changes are refused at once (UNAVAILABLE, no effect), as KV writes are.
  // (A commit that merely failed is retried: no reason to refuse.)
  job_options.rendezvous.write_check = [kv = server->kv_store_.get()] { return kv->FailStop(); };
  auto job_services = session::JobServices::Create(clock, *server->commit_loop_, job_options);
  if (!job_services.ok()) {
    return absl::Status(
        job_services.status().code(),
        absl::StrCat("cannot restore the jobs of ", opts.store.empty() ? opts.data_dir : opts.store,
                     ": ", job_services.status().message()));
  }
  server->job_services_ = *std::move(job_services);
  if (server->metrics_ != nullptr) {
    // Metrics are not worth refusing to serve for: they start from zero then.
    absl::Status restored =
        RestoreJobMetrics(*server->state_store_, *server->job_services_, server->metrics_->jobs());
    if (!restored.ok()) {
      DDP_LOG(WARNING) << "the job metrics start from zero: cannot read what the store kept ("
                       << restored << ")";
    }
  }
  server->commit_loop_->Start();
  for (const auto& [job_id, token_hash] : server->job_services_->JobTokenHashes()) {
    server->authorizer_->SetJobTokenHash(job_id, token_hash);
  }

  grpc::ServerBuilder builder;
  const std::string listen = absl::StrCat(opts.bind_address, ":", opts.port);
  builder.AddListeningPort(listen, GrpcServerCredentials(opts.tls, opts.tls_reload_interval),
                           &server->port_);
  builder.SetMaxReceiveMessageSize(MaxMessageBytes(opts.kv.limits));
  // Every agent holds one connection; BDP probing (pings and a timer per
  // transport to size flow-control windows for bulk transfers) costs the
  // timer thread ~8 % of a core at 4,096 connections and buys nothing for
  // small control messages.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // Clients may keep their connections alive with HTTP/2 pings (agents behind
  // a NAT or a load balancer; rdzv_sim --keepalive-ms): one a second per
  // connection is accepted, data or not (gRPC's default calls anything more
  // than one per 5 minutes without data abuse and closes the connection).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC sets SO_REUSEPORT by default, which lets a second coordinator bind
  // the same port and split the clients between two stores.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A connection that never completes its HTTP/2 handshake holds a descriptor
  // for gRPC's default of 120 s; a flood of such connections starves real
  // clients. 20 s is ample for a handshake.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 20000);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(rpc::NewMalformedRequestInterceptorFactory());
  if (server->metrics_ != nullptr) creators.push_back(server->metrics_->RpcInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(creators));
  // Watches, and the agents' sessions unless they run on the callback API
  // (--session-queues 0; the watches then start on one queue).
  rpc::AsyncStreamQueuesOptions queue_options;
  queue_options.min_queues = std::max(1, opts.jobs.session.completion_queues);
  queue_options.streams_per_queue = opts.jobs.session.streams_per_completion_queue;
  server->stream_queues_ = std::make_unique<rpc::AsyncStreamQueues>(queue_options);
  server->kv_service_->RegisterWith(builder, *server->stream_queues_);
  ha::ClusterService::Status cluster_status = opts.cluster_status;
  if (!cluster_status) {
    const std::string where = opts.store.empty()
                                  ? absl::StrCat("sqlite:", opts.data_dir, "/", kStateDatabase)
                                  : opts.store;
    cluster_status = [where, sqlite = opts.store.empty(),
                      data_dir = opts.data_dir](bool /*etcd_health*/) {
      v1::ClusterStatus status;
      status.set_store(where);
      status.set_role(v1::ClusterStatus::SINGLE);
      if (sqlite) status.set_database_bytes(SqliteDatabaseBytes(data_dir));
      return status;
    };
  }
  const auth::Authorizer* authorizer = server->authorizer_.get();
  server->cluster_service_ = std::make_unique<ha::ClusterService>(
      std::move(cluster_status), [authorizer](grpc::CallbackServerContext* context) {
        return rpc::AuthorizeCall(authorizer, *context, "/ddp.v1.ClusterService/GetClusterStatus",
                                  "");
      });
  builder.RegisterService(server->cluster_service_.get());
  server->node_service_ =
      std::make_unique<rpc::GrpcNodeService>(*server->fleet_, server->authorizer_.get());
  builder.RegisterService(server->node_service_.get());
  server->job_services_->RegisterWith(builder, server->stream_queues_.get());
  server->stream_queues_->RegisterWith(builder);
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr || server->port_ == 0) {
    server->job_services_->Shutdown();
    server->kv_store_->Shutdown();
    server->commit_loop_->Shutdown();
    absl::Status why = DiagnoseListen(opts.bind_address, opts.port, "gRPC", "--port");
    if (why.ok()) {
      why = absl::UnavailableError(
          absl::StrCat("cannot listen for gRPC on ", listen, "; pick another --port or --bind"));
    }
    return why;
  }
  server->stream_queues_->Start();
  const int udp_port = opts.heartbeat_udp_port < 0 ? server->port_ : opts.heartbeat_udp_port;
  absl::Status udp = server->job_services_->StartHeartbeatUdp(opts.bind_address, udp_port);
  if (absl::IsAlreadyExists(udp) && opts.port == 0 && opts.heartbeat_udp_port < 0) {
    // --port 0: the system picked a TCP port whose UDP twin is taken. Agents
    // learn the UDP port from their session (Registered.udp_port), so any
    // free one serves as well.
    DDP_LOG(INFO) << "UDP port " << udp_port << " (the gRPC port's number) is taken: "
                  << "heartbeats over UDP on a free port instead";
    udp = server->job_services_->StartHeartbeatUdp(opts.bind_address, 0);
  }
  if (!udp.ok()) {
    server->Shutdown();
    return absl::Status(udp.code(),
                        absl::StrCat(udp.message(),
                                     "; pick another --heartbeat-udp-port (0: any free port), "
                                     "or leave --heartbeat-udp off"));
  }
  if (server->heartbeat_udp_port() != 0) {
    DDP_LOG(INFO) << "heartbeats over UDP on " << opts.bind_address << ":"
                  << server->heartbeat_udp_port();
  }
  DDP_LOG(INFO) << "serving on " << server->address() << " (data dir " << opts.data_dir << "; gRPC "
                << (!opts.tls.enabled()          ? "in plaintext"
                    : opts.tls.client_ca.empty() ? "over TLS"
                                                 : "over mTLS, client certificates required")
                << ")";
  DDP_LOG(INFO) << "authorization "
                << (server->authorizer_->enabled()
                        ? "on: every call needs the admin token (--admin-token-file)"
                        : "off (no --admin-token-file)");
  if (!IsLoopback(opts.bind_address) && !server->authorizer_->enabled()) {
    DDP_LOG(WARNING) << "no authorization on " << opts.bind_address
                     << ": anyone who can reach this address can cancel jobs, register nodes "
                        "and overwrite keys. Give --admin-token-file, or bind to 127.0.0.1 or a "
                        "network the cluster alone reaches (--bind)";
  }
  if (!IsLoopback(opts.bind_address) && !opts.tls.enabled()) {
    DDP_LOG(WARNING) << "plaintext on " << opts.bind_address
                     << ": tokens and data can be read off the network. Give --tls-cert and "
                        "--tls-key (and --tls-client-ca for mTLS)";
  }
  if (absl::Status http = server->StartHttp(); !http.ok()) {
    server->Shutdown();
    return http;
  }
  return server;
}

absl::Status CoordinatorServer::StartHttp() {
  if (!options_.http.has_value()) return absl::OkStatus();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  auto gateway = http::RestGateway::Create(grpc_server_->InProcessChannel(args), RestOptions());
  if (!gateway.ok()) return gateway.status();
  rest_gateway_ = *std::move(gateway);
  http::HttpListenerOptions http_options = *options_.http;
  http_options.bind_address = options_.bind_address;
  http_options.tls = options_.tls;
  http_options.tls_reload_interval = options_.tls_reload_interval;
  http_options.answer_inline = [this](absl::string_view method, absl::string_view target) {
    return http::AnswerHealthProbe(method, target, [this] { return Readiness(); });
  };
  auto listener = http::HttpListener::Start(http_options, [this](httplib::Server& routes) {
    http::InstallHealthChecks(routes, [this] { return Readiness(); });
    std::function<absl::Status(const std::string&)> authorize;
    if (authorizer_->enabled()) {
      // Every job's figures: the admin token (Prometheus: `authorization`
      // with `credentials_file`).
      const auth::Authorizer* authorizer = authorizer_.get();
      authorize = [authorizer](const std::string& header) {
        const auth::Identity identity = authorizer->Resolve(header);
        if (identity.kind == auth::Identity::Kind::kAdmin) return absl::OkStatus();
        if (identity.kind == auth::Identity::Kind::kNone) {
          return absl::UnauthenticatedError(
              "/metrics: send 'Authorization: Bearer ADMIN_TOKEN' (Prometheus: "
              "authorization.credentials_file)");
        }
        return absl::PermissionDeniedError("/metrics needs the admin token, not a job's");
      };
    }
    http::InstallMetricsEndpoint(
        routes, [this] { return metrics_->Scrape(ReadScrapeState()); }, std::move(authorize));
    rest_gateway_->Install(routes);
    http::InstallDashboard(routes);
  });
  if (!listener.ok()) return listener.status();
  http_listener_ = *std::move(listener);
  return absl::OkStatus();
}

metrics::ScrapeState CoordinatorServer::ReadScrapeState() {
  metrics::ScrapeState state;
  const kv::KvStoreStatus kv = kv_store_->Status();
  state.kv_revision = kv.revision;
  state.kv_keys = kv.keys;
  state.kv_leases = kv.leases;
  state.kv_watchers = kv.watchers;
  state.writes_accepted = kv_store_->FailStop().ok();
  state.job_watchers = job_services_->job_watchers();
  state.sessions_open = job_services_->open_sessions();
  for (const auto& [node_state, count] : fleet_->ledger().CountByState()) {
    state.nodes_by_state.emplace_back(fleet::NodeStateName(node_state), count);
  }
  for (const v1::Node& node : fleet_->ledger().List()) {
    if (node.incident_count() > 0) {
      state.node_incidents.emplace_back(node.node_id(), node.incident_count());
    }
  }
  if (options_.store.empty()) state.database_bytes = SqliteDatabaseBytes(options_.data_dir);
  if (options_.cluster_status) {
    state.leader_changes = options_.cluster_status(/*etcd_health=*/false).leader_changes();
  }
  if (const auto stats = job_services_->heartbeat_datagram_stats()) {
    state.heartbeat_datagrams = metrics::ScrapeState::HeartbeatDatagrams{
        stats->accepted,   stats->dropped,      stats->refused,        stats->acks,
        stats->overflowed, stats->states_taken, stats->states_deferred};
  }
  auto jobs = job_services_->ListJobs(/*include_past_runs=*/false);
  if (!jobs.ok()) return state;
  for (v1::Job& job : *jobs) {
    if (!rendezvous::IsTerminal(job.state())) {
      auto with_nodes = job_services_->GetJob(job.job_id(), /*include_nodes=*/true);
      if (with_nodes.ok()) job = *std::move(with_nodes);
    }
    state.jobs.push_back(std::move(job));
  }
  return state;
}

absl::Status CoordinatorServer::Readiness() {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_) return absl::UnavailableError("shutting down");
  }
  return kv_store_->WriteHealth();
}

std::string CoordinatorServer::address() const {
  return absl::StrCat(options_.bind_address, ":", port_);
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

void CoordinatorServer::Shutdown() {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  if (grpc_server_ == nullptr) return;  // Start failed half way; members clean up
  DDP_LOG(INFO) << "shutting down " << address();
  // HTTP first: its event streams and REST calls go through the gRPC server.
  if (rest_gateway_ != nullptr) rest_gateway_->BeginShutdown();
  if (http_listener_ != nullptr) http_listener_->Stop();
  // Sessions and stores first: they end agent streams, job watches, KV watch
  // streams and pending waits (UNAVAILABLE), so the gRPC server has no
  // long-lived call left to wait for.
  job_services_->Shutdown();
  kv_store_->Shutdown();
  commit_loop_->Shutdown();  // the last commit; nothing is sent after it
  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.shutdown_grace));
  grpc_server_->Shutdown(deadline);
  grpc_server_->Wait();
  stream_queues_->Stop();  // after the server, before it is destroyed
  grpc_server_.reset();
  stream_queues_.reset();
  http_listener_.reset();
  rest_gateway_.reset();
  job_services_.reset();  // after the server: reactors may still reference it
  kv_service_.reset();
  cluster_service_.reset();
  node_service_.reset();
  kv_store_.reset();
  commit_loop_.reset();
  fleet_.reset();        // after the loop whose participant it was
  state_store_.reset();  // closes the database
  lock_.reset();
  DDP_LOG(INFO) << "shutdown complete";
}

}  // namespace ddp::server
