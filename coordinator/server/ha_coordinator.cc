#include "coordinator/server/ha_coordinator.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/ha/etcd_health.h"
#include "coordinator/storage/etcd/etcd_channel.h"
#include "coordinator/storage/etcd/etcd_state_store.h"

namespace ddp::server {
namespace {

std::string DefaultAdvertiseHost(const std::string& bind) {
  if (bind != "0.0.0.0" && bind != "::" && bind != "[::]") return bind;
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::string HostName() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HaCoordinator>> HaCoordinator::Start(HaCoordinatorOptions options) {
  std::unique_ptr<HaCoordinator> ha(new HaCoordinator(std::move(options)));
  const CoordinatorServerOptions& server = ha->options_.server;
  DDP_ASSIGN_OR_RETURN(ha->spec_, storage::ParseEtcdStoreSpec(server.store));
  ha->etcd_ = storage::OpenEtcdChannel(ha->spec_.endpoints);

  // The ports first: the leader key names them.
  ha::StandbyServerOptions standby;
  standby.bind_address = server.bind_address;
  standby.port = server.port;
  standby.http = server.http;
  standby.tls = server.tls;
  standby.tls_reload_interval = server.tls_reload_interval;
  standby.admin_token = server.admin_token;
  HaCoordinator* self = ha.get();
  standby.status = [self](bool etcd_health) { return self->Status(etcd_health); };
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<ha::StandbyServer> listeners,
                       ha::StandbyServer::Start(std::move(standby)));
  ha->port_ = listeners->port();
  ha->http_port_ = listeners->http_port();
  {
    absl::MutexLock lock(&ha->mu_);
    ha->standby_ = std::move(listeners);
  }
  const std::string host = ha->options_.advertise_host.empty()
                               ? DefaultAdvertiseHost(server.bind_address)
                               : ha->options_.advertise_host;
  ha->self_.set_grpc_address(absl::StrCat(host, ":", ha->port_));
  if (ha->http_port_ != 0) ha->self_.set_http_address(absl::StrCat(host, ":", ha->http_port_));
  ha->self_.set_http_scheme(server.tls.enabled() ? "https" : "http");
  ha->self_.set_name(absl::StrCat(HostName(), "/", getpid()));

  // The prefix followed from now on, so that the state is warm when this
  // coordinator is elected.
  {
    absl::MutexLock lock(&ha->mu_);
    ha->mirror_ = storage::EtcdPrefixMirror::Start(
        ha->etcd_, storage::EtcdStateStore::MirrorOptions(ha->spec_.prefix));
  }

  ha::LeaderElectionOptions election;
  election.prefix = ha->spec_.prefix;
  election.self = ha->self_;
  election.lease_ttl = ha->options_.leader_lease;
  election.on_leader = [self](const v1::CoordinatorInfo& leader) {
    {
      absl::MutexLock lock(&self->info_mu_);
      self->leader_seen_ = leader;
    }
    self->leader_changes_.Observe(leader);
    absl::MutexLock lock(&self->mu_);
    if (self->standby_ != nullptr) self->standby_->SetLeader(leader);
  };
  election.on_lost = self->options_.on_fatal;
  auto created = ha::LeaderElection::Create(ha->etcd_, std::move(election));
  if (!created.ok()) {
    ha->Shutdown();
    return absl::Status(created.status().code(), absl::StrCat("cannot reach etcd at ", server.store,
                                                              ": ", created.status().message()));
  }
  ha->election_ = *std::move(created);
  DDP_LOG(INFO) << "standing by on " << ha->self_.grpc_address() << " for the leadership of "
                << server.store << " (leader lease "
                << absl::FormatDuration(ha->election_->lease_ttl()) << ")";
  ha->campaign_ = std::thread([self] { self->CampaignThenLead(); });
  return ha;
}

HaCoordinator::~HaCoordinator() { Shutdown(); }

bool HaCoordinator::leading() const {
  absl::MutexLock lock(&info_mu_);
  return leading_;
}

void HaCoordinator::CampaignThenLead() {
  absl::Status campaign = election_->Campaign();
  if (!campaign.ok()) return;  // stopped, or lost (on_lost has run)
  absl::Status promoted = Promote();
  if (!promoted.ok() && !absl::IsCancelled(promoted)) {
    election_->Resign();
    options_.on_fatal(absl::Status(
        promoted.code(), absl::StrCat("elected, but cannot serve: ", promoted.message())));
  }
}

absl::Status HaCoordinator::Promote() {
  const absl::Time elected = absl::Now();
  std::unique_ptr<ha::StandbyServer> standby;
  std::unique_ptr<storage::EtcdPrefixMirror> mirror;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::CancelledError("shutting down");
    standby = std::move(standby_);
    mirror = std::move(mirror_);
  }
  DDP_LOG(INFO) << "elected leader of " << options_.server.store << " (fence revision "
                << election_->fence().create_revision << "); loading the state";
  standby->Stop();
  standby.reset();
  storage::EtcdStateStoreOptions store_options;
  store_options.fence = election_->fence();
  store_options.on_fatal = options_.on_fatal;
  const absl::Time loading = absl::Now();
  absl::StatusOr<std::unique_ptr<storage::EtcdStateStore>> opened =
      mirror == nullptr
          ? absl::FailedPreconditionError("no mirror")
          : storage::EtcdStateStore::OpenFromMirror(etcd_, spec_.prefix, store_options, *mirror,
                                                    options_.mirror_catch_up);
  // Taken, or not there in time: it stops following before a cold load.
  mirror.reset();
  std::string source = "this standby's mirror";
  if (!opened.ok()) {
    DDP_LOG(WARNING) << "the state cannot come from this standby's mirror of "
                     << options_.server.store << " (" << opened.status()
                     << "); reading it from etcd";
    source = "etcd";
    opened = storage::EtcdStateStore::Open(etcd_, spec_.prefix, store_options);
  }
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<storage::EtcdStateStore> store, std::move(opened));
  const absl::Duration opening = absl::Now() - loading;
  CoordinatorServerOptions server_options = options_.server;
  server_options.port = port_;
  if (server_options.http) server_options.http->port = http_port_;
  server_options.cluster_status = [this](bool etcd_health) { return Status(etcd_health); };
  // Only while the leadership lease holds at that very moment: a leader that
  // was paused past it must not renew an agent's lease (the new leader
  // counts from its own start), nor answer a read (its state may be stale).
  auto leading_now = [election = election_.get()] { return election->CheckLeading(); };
  server_options.jobs.rendezvous.serving_check = leading_now;
  server_options.kv.read_check = leading_now;
  {
    absl::MutexLock lock(&info_mu_);
    leading_ = true;
  }
  leader_changes_.Observe(self_);
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorServer> server,
                       CoordinatorServer::Start(server_options, std::move(store)));
  DDP_LOG(INFO) << "leading: serving " << options_.server.store << " on " << self_.grpc_address()
                << " " << absl::FormatDuration(absl::Now() - elected)
                << " after the election (state from " << source << ": store opened in "
                << absl::FormatDuration(opening) << ", loaded and served in "
                << absl::FormatDuration(absl::Now() - loading) << ")";
  {
    absl::MutexLock lock(&mu_);
    if (!shutting_down_) {
      server_ = std::move(server);
      return absl::OkStatus();
    }
  }
  server->Shutdown();  // Shutdown came while this one was being elected
  election_->Resign();
  return absl::CancelledError("shutting down");
}

v1::ClusterStatus HaCoordinator::Status(bool etcd_health) const {
  v1::ClusterStatus status;
  status.set_store(options_.server.store);
  *status.mutable_self() = self_;
  {
    absl::MutexLock lock(&info_mu_);
    status.set_role(leading_ ? v1::ClusterStatus::LEADER : v1::ClusterStatus::STANDBY);
    const v1::CoordinatorInfo& leader = leading_ ? self_ : leader_seen_;
    if (!leader.grpc_address().empty()) *status.mutable_leader() = leader;
  }
  if (election_ != nullptr) {
    status.set_leader_lease_ms(absl::ToInt64Milliseconds(election_->lease_ttl()));
  }
  status.set_leader_changes(leader_changes_.count());
  if (!etcd_health) return status;
  for (v1::EtcdEndpointStatus& endpoint :
       ha::CheckEtcdEndpoints(spec_.endpoints, absl::Seconds(1))) {
    *status.add_etcd_endpoints() = std::move(endpoint);
  }
  return status;
}

void HaCoordinator::Shutdown() {
  std::unique_ptr<CoordinatorServer> server;
  std::unique_ptr<ha::StandbyServer> standby;
  std::unique_ptr<storage::EtcdPrefixMirror> mirror;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
    server = std::move(server_);
    standby = std::move(standby_);
    mirror = std::move(mirror_);
  }
  mirror.reset();
  if (server != nullptr) {
    server->Shutdown();  // the last commits, still fenced by a live lease
    election_->Resign();
    DDP_LOG(INFO) << "resigned the leadership of " << options_.server.store;
  }
  if (standby != nullptr) standby->Stop();
  if (election_ != nullptr) election_->Stop();
  if (campaign_.joinable()) campaign_.join();
}

}  // namespace ddp::server
