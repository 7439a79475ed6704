#include "coordinator/session/job_services.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "coordinator/session/grpc_session_reactor.h"

namespace ddp::session {
namespace {

// A states datagram's payload: a ddp.v1.Heartbeat that holds only workers.
absl::Status ReportDatagramStates(RendezvousService& rendezvous, const rendezvous::NodeRef& ref,
                                  absl::string_view payload) {
  v1::Heartbeat heartbeat;
  if (!heartbeat.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("a states datagram's ", payload.size(),
                                                   " payload bytes are not a ddp.v1.Heartbeat"));
  }
  if (heartbeat.has_header() || heartbeat.sequence() != 0) {
    return absl::InvalidArgumentError(
        "a states datagram's Heartbeat sets a header or a sequence; it holds only workers "
        "(the datagram names the session, generation and sequence)");
  }
  return ReportWorkerStates(rendezvous, ref, heartbeat);
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobServices>> JobServices::Create(const Clock& clock,
                                                                 commit::CommitLoop& loop,
                                                                 JobServicesOptions options) {
  std::unique_ptr<JobServices> services(new JobServices());
  RendezvousServiceOptions rendezvous = options.rendezvous;
  if (options.heartbeat_udp) {
    // Before the core: its tick asks the endpoint for heartbeats dropped
    // unread. The endpoint's thread (StartHeartbeatUdp) runs once the core
    // exists.
    JobServices* raw = services.get();
    services->heartbeat_endpoint_ = std::make_unique<UdpHeartbeatEndpoint>(
        [raw](const rendezvous::NodeRef& ref) { return raw->rendezvous_->Heartbeat(ref); },
        [raw](const rendezvous::NodeRef& ref, absl::string_view payload) {
          return ReportDatagramStates(*raw->rendezvous_, ref, payload);
        });
    rendezvous.take_dropped_heartbeats = [endpoint = services->heartbeat_endpoint_.get()] {
      return endpoint->TakeOverflow();
    };
  }
  DDP_ASSIGN_OR_RETURN(services->rendezvous_, RendezvousService::Create(clock, loop, rendezvous));
  services->Wire(clock, options);
  return services;
}

void JobServices::Wire(const Clock& clock, const JobServicesOptions& options) {
  RendezvousService* core = rendezvous_.get();
  stack_collector_ = std::make_unique<StackCollector>(
      options.stacks, clock,
      [core](const std::string& job_id, const StackCollector::Node& node, uint64_t request_id) {
        return core->RequestStacks(job_id, node.node_id, node.incarnation, request_id);
      });
  GrpcSessionServiceOptions session = options.session;
  session.stack_collector = stack_collector_.get();
  session.heartbeat_endpoint = heartbeat_endpoint_.get();
  if (session.completion_queues > 0) {
    session_calls_ = std::make_unique<AsyncSessionCalls>(*rendezvous_, session);
    own_queue_options_.min_queues = session.completion_queues;
    own_queue_options_.streams_per_queue = session.streams_per_completion_queue;
  } else {
    session_service_ = std::make_unique<GrpcSessionService>(*rendezvous_, session);
  }
  GrpcJobServiceOptions jobs = options.jobs;
  jobs.stack_collector = stack_collector_.get();
  job_service_ = std::make_unique<GrpcJobService>(*rendezvous_, jobs);
}

JobServices::~JobServices() {
  Shutdown();
  StopSessionQueues();
}

void JobServices::RegisterWith(grpc::ServerBuilder& builder, rpc::AsyncStreamQueues* queues) {
  if (session_calls_ != nullptr) {
    builder.RegisterService(session_calls_->service());
    session_queues_ = queues;
    if (queues == nullptr) {
      own_queues_ = std::make_unique<rpc::AsyncStreamQueues>(own_queue_options_);
      session_queues_ = own_queues_.get();
    }
    session_queues_->AddMethod(session_calls_.get());
    if (own_queues_ != nullptr) own_queues_->RegisterWith(builder);
  } else {
    builder.RegisterService(session_service_.get());
  }
  builder.RegisterService(job_service_.get());
}

void JobServices::StartSessionQueues() {
  if (own_queues_ != nullptr) own_queues_->Start();
}

void JobServices::StopSessionQueues() {
  if (own_queues_ != nullptr) own_queues_->Stop();
}

absl::Status JobServices::StartHeartbeatUdp(const std::string& address, int port) {
  if (heartbeat_endpoint_ == nullptr) return absl::OkStatus();
  return heartbeat_endpoint_->Start(address, port);
}

int JobServices::heartbeat_udp_port() const {
  return heartbeat_endpoint_ != nullptr ? heartbeat_endpoint_->port() : 0;
}

int JobServices::open_sessions() const {
  return session_calls_ != nullptr ? session_calls_->open_streams()
                                   : session_service_->open_streams();
}

int JobServices::session_queue_threads() const {
  return session_queues_ != nullptr ? session_queues_->running_queues() : 0;
}

int64_t JobServices::session_writes_handed() const {
  return session_queues_ != nullptr ? session_queues_->handed_writes() : 0;
}

int JobServices::job_watchers() const { return rendezvous_->watcher_count(); }

void JobServices::Shutdown() {
  if (heartbeat_endpoint_ != nullptr) heartbeat_endpoint_->Stop();
  if (rendezvous_ == nullptr) return;  // Create failed before the core was made
  // Pending GetJobStacks calls answer now, with the nodes that answered.
  stack_collector_->Shutdown();
  rendezvous_->CloseAllSessions(
      absl::UnavailableError("the coordinator is shutting down; reconnect and register again with "
                             "the same incarnation to resume"));
  rendezvous_->Shutdown();
}

}  // namespace ddp::session
