#ifndef DDP_COORDINATOR_HA_STANDBY_SERVER_H_
#define DDP_COORDINATOR_HA_STANDBY_SERVER_H_

// What a standby coordinator serves on the leader's ports while it waits to
// be elected: every gRPC call but ClusterService ends at once with
// UNAVAILABLE, naming the leader in the message and in the trailing metadata
// "ddp-leader" (HOST:PORT; absent while none is elected), which ddp-client,
// ddpctl and the tools follow; every HTTP request but the probes, /metrics
// and GET /v1/cluster is answered 307 Temporary Redirect to the same path on
// the leader (503 while none is elected).
//
//   /healthz 200 (the process lives)   /readyz 503 "standby ..." (send no
//   traffic here: a Kubernetes Service then routes to the leader alone)
//   /metrics ddp_coordinator_leader 0
//
// Lifecycle: Start (bound) --Stop--> stopped (ports free for the leader's
// servers). Thread-safety: thread-safe.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/tls_files.h"
#include "coordinator/auth/authorizer.h"
#include "coordinator/ha/cluster_service.h"
#include "coordinator/http/http_listener.h"
#include "ddp/v1/cluster.pb.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server.h"

namespace ddp::ha {

// The trailing metadata that names the leader.
inline constexpr char kLeaderMetadata[] = "ddp-leader";

struct StandbyServerOptions {
  std::string bind_address = "0.0.0.0";
  int port = 29400;                               // 0: any free port
  std::optional<http::HttpListenerOptions> http;  // nullopt: no HTTP
  TlsServerFiles tls;
  absl::Duration tls_reload_interval = absl::Seconds(10);
  // ClusterService's answer (and GET /v1/cluster's).
  ClusterService::Status status;
  // --admin-token-file's token (empty: no authorization). A standby knows
  // no job's token: GetClusterStatus with another one is sent to the leader.
  std::string admin_token;
};

class StandbyServer : public grpc::CallbackGenericService {
 public:
  // Errors as CoordinatorServer::Start's for the listeners.
  static absl::StatusOr<std::unique_ptr<StandbyServer>> Start(StandbyServerOptions options);
  ~StandbyServer() override;  // Stop()

  int port() const { return port_; }
  int http_port() const { return http_ != nullptr ? http_->port() : 0; }
  // The leader to send clients to (an empty info: none elected).
  void SetLeader(const v1::CoordinatorInfo& leader);
  v1::CoordinatorInfo leader() const;
  // Closes both listeners (idempotent).
  void Stop();

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override;

 private:
  explicit StandbyServer(StandbyServerOptions options);
  // UNAVAILABLE naming the leader (or that none is elected).
  absl::Status Refusal() const;
  void InstallRoutes(httplib::Server& server);

  // OK for the admin (or anyone, without authorization); else the refusal.
  absl::Status AuthorizeStatus(absl::string_view authorization) const;

  const StandbyServerOptions options_;
  const auth::Authorizer authorizer_;
  ClusterService cluster_service_;
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<http::HttpListener> http_;
  int port_ = 0;
  mutable absl::Mutex mu_;
  v1::CoordinatorInfo leader_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddp::ha

#endif  // DDP_COORDINATOR_HA_STANDBY_SERVER_H_
