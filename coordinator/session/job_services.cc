#include "coordinator/session/job_services.h"

#include <utility>

#include "common/status_macros.h"

namespace ddp::session {

absl::StatusOr<std::unique_ptr<JobServices>> JobServices::Create(const Clock& clock,
                                                                 commit::CommitLoop& loop,
                                                                 JobServicesOptions options) {
  DDP_ASSIGN_OR_RETURN(std::unique_ptr<RendezvousService> rendezvous,
                       RendezvousService::Create(clock, loop, options.rendezvous));
  return Around(clock, std::move(rendezvous), options);
}

std::unique_ptr<JobServices> JobServices::Around(const Clock& clock,
                                                 std::unique_ptr<RendezvousService> rendezvous,
                                                 const JobServicesOptions& options) {
  std::unique_ptr<JobServices> services(new JobServices());
  services->rendezvous_ = std::move(rendezvous);
  RendezvousService* core = services->rendezvous_.get();
  services->stack_collector_ = std::make_unique<StackCollector>(
      options.stacks, clock,
      [core](const std::string& job_id, const StackCollector::Node& node, uint64_t request_id) {
        return core->RequestStacks(job_id, node.node_id, node.incarnation, request_id);
      });
  GrpcSessionServiceOptions session = options.session;
  session.stack_collector = services->stack_collector_.get();
  if (options.heartbeat_udp) {
    services->heartbeat_endpoint_ = std::make_unique<UdpHeartbeatEndpoint>(
        [core](const rendezvous::NodeRef& ref) { return core->Heartbeat(ref); });
    session.heartbeat_endpoint = services->heartbeat_endpoint_.get();
  }
  if (session.completion_queues > 0) {
    services->session_queues_ =
        std::make_unique<AsyncSessionQueues>(*services->rendezvous_, session);
  } else {
    services->session_service_ =
        std::make_unique<GrpcSessionService>(*services->rendezvous_, session);
  }
  GrpcJobServiceOptions jobs = options.jobs;
  jobs.stack_collector = services->stack_collector_.get();
  services->job_service_ = std::make_unique<GrpcJobService>(*services->rendezvous_, jobs);
  return services;
}

JobServices::~JobServices() {
  Shutdown();
  StopSessionQueues();
}

void JobServices::RegisterWith(grpc::ServerBuilder& builder) {
  if (session_queues_ != nullptr) {
    session_queues_->RegisterWith(builder);
  } else {
    builder.RegisterService(session_service_.get());
  }
  builder.RegisterService(job_service_.get());
}

void JobServices::StartSessionQueues() {
  if (session_queues_ != nullptr) session_queues_->Start();
}

void JobServices::StopSessionQueues() {
  if (session_queues_ != nullptr) session_queues_->Stop();
}

absl::Status JobServices::StartHeartbeatUdp(const std::string& address, int port) {
  if (heartbeat_endpoint_ == nullptr) return absl::OkStatus();
  return heartbeat_endpoint_->Start(address, port);
}

int JobServices::heartbeat_udp_port() const {
  return heartbeat_endpoint_ != nullptr ? heartbeat_endpoint_->port() : 0;
}

int JobServices::open_sessions() const {
  return session_queues_ != nullptr ? session_queues_->open_streams()
                                    : session_service_->open_streams();
}

int JobServices::session_queue_threads() const {
  return session_queues_ != nullptr ? session_queues_->running_queues() : 0;
}

int JobServices::job_watchers() const { return rendezvous_->watcher_count(); }

void JobServices::Shutdown() {
  if (heartbeat_endpoint_ != nullptr) heartbeat_endpoint_->Stop();
  // Pending GetJobStacks calls answer now, with the nodes that answered.
  stack_collector_->Shutdown();
  rendezvous_->CloseAllSessions(
      absl::UnavailableError("the coordinator is shutting down; reconnect and register again with "
                             "the same incarnation to resume"));
  rendezvous_->Shutdown();
}

}  // namespace ddp::session
