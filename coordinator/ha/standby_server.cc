#include "coordinator/ha/standby_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/grpc_tls.h"
#include "common/listen_address.h"
#include "common/proto_json.h"
#include "coordinator/http/http_errors.h"
#include "grpcpp/server_builder.h"
#include "httplib.h"

namespace ddp::ha {
namespace {

// Ends a call at once with a status and trailing metadata.
class RefusingReactor final : public grpc::ServerGenericBidiReactor {
 public:
  RefusingReactor(grpc::GenericCallbackServerContext* context, const absl::Status& status,
                  const std::string& leader) {
    if (!leader.empty()) context->AddTrailingMetadata(kLeaderMetadata, leader);
    Finish(ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

}  // namespace

StandbyServer::StandbyServer(StandbyServerOptions options)
    : options_(std::move(options)),
      authorizer_(options_.admin_token),
      cluster_service_(options_.status, [this](grpc::CallbackServerContext* context) {
        auto header = context->client_metadata().find("authorization");
        const absl::Status allowed =
            AuthorizeStatus(header == context->client_metadata().end()
                                ? absl::string_view()
                                : absl::string_view(header->second.data(), header->second.size()));
        const std::string leader = this->leader().grpc_address();
        if (!allowed.ok() && !leader.empty()) context->AddTrailingMetadata(kLeaderMetadata, leader);
        return allowed;
      }) {}

absl::Status StandbyServer::AuthorizeStatus(absl::string_view authorization) const {
  if (!authorizer_.enabled()) return absl::OkStatus();
  if (authorizer_.Resolve(authorization).kind == auth::Identity::Kind::kAdmin) {
    return absl::OkStatus();
  }
  return Refusal();
}

absl::StatusOr<std::unique_ptr<StandbyServer>> StandbyServer::Start(StandbyServerOptions options) {
  std::unique_ptr<StandbyServer> server(new StandbyServer(std::move(options)));
  const StandbyServerOptions& opts = server->options_;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat(opts.bind_address, ":", opts.port),
                           GrpcServerCredentials(opts.tls, opts.tls_reload_interval),
                           &server->port_);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&server->cluster_service_);
  builder.RegisterCallbackGenericService(server.get());
  server->grpc_ = builder.BuildAndStart();
  if (server->grpc_ == nullptr || server->port_ == 0) {
    absl::Status why = DiagnoseListen(opts.bind_address, opts.port, "gRPC", "--port");
    return why.ok() ? absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ",
                                                          opts.bind_address, ":", opts.port))
                    : why;
  }
  if (opts.http) {
    http::HttpListenerOptions http_options = *opts.http;
    http_options.bind_address = opts.bind_address;
    http_options.tls = opts.tls;
    http_options.tls_reload_interval = opts.tls_reload_interval;
    StandbyServer* self = server.get();
    auto listener = http::HttpListener::Start(
        http_options, [self](httplib::Server& routes) { self->InstallRoutes(routes); });
    if (!listener.ok()) {
      server->Stop();
      return listener.status();
    }
    server->http_ = *std::move(listener);
  }
  return server;
}

StandbyServer::~StandbyServer() { Stop(); }

void StandbyServer::Stop() {
  if (http_ != nullptr) http_->Stop();
  if (grpc_ != nullptr) {
    grpc_->Shutdown(std::chrono::system_clock::now());
    grpc_->Wait();
    grpc_.reset();
  }
  http_.reset();
}

void StandbyServer::SetLeader(const v1::CoordinatorInfo& leader) {
  absl::MutexLock lock(&mu_);
  leader_ = leader;
}

v1::CoordinatorInfo StandbyServer::leader() const {
  absl::MutexLock lock(&mu_);
  return leader_;
}

absl::Status StandbyServer::Refusal() const {
  const v1::CoordinatorInfo leader = this->leader();
  if (leader.grpc_address().empty()) {
    return absl::UnavailableError(
        "this coordinator is a standby and no coordinator leads yet (an election is under way, "
        "or etcd is unreachable); retry in a moment");
  }
  return absl::UnavailableError(absl::StrCat(
      "this coordinator is a standby; the leader is ", leader.grpc_address(), " (", leader.name(),
      "): call it, or give every coordinator in --coordinator / $DDP_COORDINATOR "
      "(comma-separated) and clients find it themselves"));
}

grpc::ServerGenericBidiReactor* StandbyServer::CreateReactor(
    grpc::GenericCallbackServerContext* ctx) {
  return new RefusingReactor(ctx, Refusal(), leader().grpc_address());
}

void StandbyServer::InstallRoutes(httplib::Server& server) {
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok (standby)\n", "text/plain");
  });
  server.Get("/readyz", [this](const httplib::Request&, httplib::Response& response) {
    response.status = 503;
    response.set_content(absl::StrCat(Refusal().message(), "\n"), "text/plain");
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    const int64_t leader_changes =
        options_.status ? options_.status(/*etcd_health=*/false).leader_changes() : 0;
    response.set_content(
        absl::StrCat(
            "# HELP ddp_coordinator_leader 1 on the coordinator that leads, 0 on a standby.\n"
            "# TYPE ddp_coordinator_leader gauge\nddp_coordinator_leader 0\n"
            "# HELP ddp_coordinator_leader_changes_seen_total Leader changes this coordinator "
            "has seen since it started (each coordinator seen elected, itself included).\n"
            "# TYPE ddp_coordinator_leader_changes_seen_total counter\n"
            "ddp_coordinator_leader_changes_seen_total ",
            leader_changes, "\n"),
        "text/plain; version=0.0.4");
  });
  auto redirect = [this](const httplib::Request& request, httplib::Response& response) {
    const v1::CoordinatorInfo leader = this->leader();
    if (leader.http_address().empty()) {
      const absl::Status refusal = Refusal();
      response.status = http::HttpStatusFromCode(refusal.code());
      response.set_content(http::ErrorJson(refusal), "application/json");
      return;
    }
    // 307 keeps the method and the body (curl -L, browsers, httplib follow).
    response.set_redirect(absl::StrCat(leader.http_scheme().empty() ? "http" : leader.http_scheme(),
                                       "://", leader.http_address(), request.target),
                          307);
  };
  server.Get("/v1/cluster", [this, redirect](const httplib::Request& request,
                                             httplib::Response& response) {
    const absl::Status allowed = AuthorizeStatus(request.get_header_value("Authorization"));
    if (!allowed.ok()) return redirect(request, response);  // the leader knows job tokens
    response.set_content(
        ProtoJson(options_.status(request.get_param_value("etcdHealth") == "true" ||
                                  request.get_param_value("etcd_health") == "true")),
        "application/json");
  });
  server.Get(".*", redirect);
  server.Post(".*", redirect);
  server.Put(".*", redirect);
  server.Patch(".*", redirect);
  server.Delete(".*", redirect);
}

}  // namespace ddp::ha
