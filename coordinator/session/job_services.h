#ifndef DDP_COORDINATOR_SESSION_JOB_SERVICES_H_
#define DDP_COORDINATOR_SESSION_JOB_SERVICES_H_

// Everything the coordinator binary needs for jobs and agent sessions, in one
// piece for its composition root: the RendezvousService (registry, in the
// commit loop) and the two gRPC services over it.
//
//   auto jobs = JobServices::Create(clock, loop, options);   // restores jobs
//   grpc::ServerBuilder builder; ... (*jobs)->RegisterWith(builder, &queues);
//   server = builder.BuildAndStart();
//   queues.Start();   // or (*jobs)->StartSessionQueues() without `queues`
//   ...
//   (*jobs)->Shutdown();   // closes sessions (UNAVAILABLE: agents resume
//                          // later) and watches, stops the threads
//   server->Shutdown();    // then the gRPC server
//   server->Wait(); queues.Stop();   // or (*jobs)->StopSessionQueues()
//   jobs.reset();          // only after the server is destroyed or shut down
//
// Thread-safety: thread-safe; Shutdown is idempotent (the destructor runs it).

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/rpc/async_stream_queues.h"
#include "coordinator/session/async_session_calls.h"
#include "coordinator/session/grpc_job_service.h"
#include "coordinator/session/grpc_session_service.h"
#include "coordinator/session/rendezvous_service.h"
#include "coordinator/session/stack_collector.h"
#include "coordinator/session/udp_heartbeat_endpoint.h"
#include "grpcpp/server_builder.h"

namespace ddp::session {

struct JobServicesOptions {
  RendezvousServiceOptions rendezvous;
  GrpcSessionServiceOptions session;  // its heartbeat_endpoint is set here
  GrpcJobServiceOptions jobs;         // its stack_collector is set here
  StackCollector::Options stacks;
  // Heartbeats over UDP (udp_heartbeat_endpoint.h) once StartHeartbeatUdp
  // binds a port.
  bool heartbeat_udp = false;
};

class JobServices {
 public:
  // In the coordinator's commit loop (see RendezvousService::Create); `clock`
  // and `loop` must outlive the object. With a loop of their own (tests,
  // tools): testing/with_own_commit_loop.h.
  static absl::StatusOr<std::unique_ptr<JobServices>> Create(const Clock& clock,
                                                             commit::CommitLoop& loop,
                                                             JobServicesOptions options);
  ~JobServices();
  JobServices(const JobServices&) = delete;
  JobServices& operator=(const JobServices&) = delete;

  // Adds SessionService and JobService to `builder` (before BuildAndStart).
  // With options.session.completion_queues > 0 the sessions run on the async
  // API, on `queues` (the server's stream queues, which its owner starts and
  // stops; null: queues of their own, options.session.completion_queues to
  // start with, which StartSessionQueues and StopSessionQueues run).
  void RegisterWith(grpc::ServerBuilder& builder, rpc::AsyncStreamQueues* queues = nullptr);
  // After BuildAndStart: starts accepting sessions on the queues of their own
  // (nothing otherwise).
  void StartSessionQueues();
  // After the server's Shutdown and Wait: stops the queues of their own.
  void StopSessionQueues();
  // With options.heartbeat_udp: binds UDP `address`:`port` (0: any free port)
  // and offers every session registering from now on heartbeats there;
  // nothing otherwise. Errors: UdpHeartbeatEndpoint::Start's.
  absl::Status StartHeartbeatUdp(const std::string& address, int port);
  // The UDP port heartbeats go to; 0: none.
  int heartbeat_udp_port() const;
  // The UDP endpoint's datagram counts; nullopt without options.heartbeat_udp.
  std::optional<UdpHeartbeatEndpoint::Stats> heartbeat_datagram_stats() const {
    if (heartbeat_endpoint_ == nullptr) return std::nullopt;
    return heartbeat_endpoint_->stats();
  }
  // Tests only: the UDP endpoint (null without options.heartbeat_udp).
  const UdpHeartbeatEndpoint* heartbeat_endpoint_for_testing() const {
    return heartbeat_endpoint_.get();
  }
  // Agent streams whose session has not ended.
  int open_sessions() const;
  // Completion queues whose thread runs (of the queues the sessions run on;
  // 0 on the callback API).
  int session_queue_threads() const;
  // Writes of another thread that the queue threads carried out
  // (AsyncStreamQueues::handed_writes; 0 on the callback API).
  int64_t session_writes_handed() const;

  // Ends every agent session with UNAVAILABLE and every watch, then stops the
  // rendezvous threads. The services keep answering (with the core's state)
  // until the gRPC server stops.
  void Shutdown();

  // ---- What the composition root (metrics, dashboard, auth) reads of the
  // jobs: RendezvousService's of the same name, with its errors ----
  // (job id, token hash) of every job that has a token.
  std::vector<std::pair<std::string, std::string>> JobTokenHashes() const {
    return rendezvous_->JobTokenHashes();
  }
  absl::StatusOr<std::vector<v1::Job>> ListJobs(bool include_past_runs) const {
    return rendezvous_->ListJobs(include_past_runs);
  }
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id, bool include_nodes) const {
    return rendezvous_->GetJob(job_id, include_nodes);
  }
  absl::StatusOr<std::vector<rendezvous::JobEvent>> EventsSince(const std::string& job_id,
                                                                int64_t after_index,
                                                                int limit) const {
    return rendezvous_->EventsSince(job_id, after_index, limit);
  }
  // Jobs are cancelled and removed through the JobService; this is for
  // in-process tools (session_memory_probe) only.
  absl::Status CancelJob(const std::string& job_id, const std::string& reason) {
    return rendezvous_->CancelJob(job_id, reason);
  }
  absl::Status RemoveJob(const std::string& job_id) { return rendezvous_->RemoveJob(job_id); }
  // Open WatchJob streams.
  int job_watchers() const;
  // Agent sessions registered (bound to a job, node and incarnation).
  int registered_sessions() const { return rendezvous_->session_count(); }

 private:
  JobServices() = default;
  // The services around rendezvous_ (and heartbeat_endpoint_, when made).
  void Wire(const Clock& clock, const JobServicesOptions& options);

  std::unique_ptr<RendezvousService> rendezvous_;
  // GetJobStacks: asks the agents over their sessions; before the services.
  std::unique_ptr<StackCollector> stack_collector_;
  std::unique_ptr<UdpHeartbeatEndpoint> heartbeat_endpoint_;  // before the services using it
  std::unique_ptr<GrpcSessionService> session_service_;       // or
  std::unique_ptr<AsyncSessionCalls> session_calls_;
  std::unique_ptr<rpc::AsyncStreamQueues> own_queues_;  // RegisterWith without queues
  rpc::AsyncStreamQueues* session_queues_ = nullptr;    // own_queues_ or the server's
  rpc::AsyncStreamQueuesOptions own_queue_options_;
  std::unique_ptr<GrpcJobService> job_service_;
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_JOB_SERVICES_H_
