#ifndef DDP_COORDINATOR_SESSION_GRPC_JOB_SERVICE_H_
#define DDP_COORDINATOR_SESSION_GRPC_JOB_SERVICE_H_

// ddp.v1.JobService (the scheduler API) over the gRPC callback API: a thin
// adapter from jobs.proto to a RendezvousService (its scheduler API).
//
//   CreateJob    idempotent: an existing job with the same settings is
//                returned; other settings give ALREADY_EXISTS.
//   GetJob       the job with its members and spares.
//   ListJobs     every job (without nodes), optionally filtered by state.
//   UpdateJob / CancelJob / ExcludeNode   then the job as GetJob shows it.
//   DrainNode    the jobs that learned of the drain, once durable.
//   GetJobStacks the Python stacks of a RUNNING job's workers, asked of every
//                member node's agent (StackCollector); answers once every
//                node answered or the timeout passed.
//   WatchJob     events with index >= from_index: first the retained ones
//                (JobRegistry::EventsSince, OUT_OF_RANGE when no longer
//                retained), then live ones; from_index 0 = live events only.
//                The stream ends with OK after the JOB_FINISHED event (or at
//                once for a finished job watched from 0 / past its end), with
//                RESOURCE_EXHAUSTED when the watcher fell too far behind
//                (watch again from the index in the message), UNAVAILABLE at
//                coordinator shutdown.
//
// Possible errors: those of jobs.proto's header comment, as the core reports
// them; INVALID_ARGUMENT for missing settings or unknown states.
// Thread-safety: thread-safe; the RendezvousService must outlive the service,
// and the service the grpc::Server it is registered with.

#include "coordinator/auth/authorizer.h"
#include "coordinator/session/rendezvous_service.h"
#include "coordinator/session/stack_collector.h"
#include "ddp/v1/jobs.grpc.pb.h"

namespace ddp::session {

struct GrpcJobServiceOptions {
  // Retained events read per EventsSince call while a watcher catches up.
  int catch_up_page = 256;
  // Bytes of events one WatchJob stream holds for a client that reads slower
  // than they come; beyond it the stream ends with RESOURCE_EXHAUSTED.
  size_t watch_buffer_bytes = 4 << 20;
  // Checks every call's bearer token, and learns the tokens of the jobs it
  // creates (null: no checks, no tokens).
  auth::Authorizer* authorizer = nullptr;
  // Gathers GetJobStacks' answers (null: GetJobStacks is UNIMPLEMENTED).
  StackCollector* stack_collector = nullptr;
};

class GrpcJobService final : public v1::JobService::CallbackService {
 public:
  GrpcJobService(RendezvousService& rendezvous, GrpcJobServiceOptions options);

  grpc::ServerUnaryReactor* CreateJob(grpc::CallbackServerContext* context,
                                      const v1::CreateJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request, v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* UpdateJob(grpc::CallbackServerContext* context,
                                      const v1::UpdateJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* DeleteJob(grpc::CallbackServerContext* context,
                                      const v1::DeleteJobRequest* request,
                                      v1::DeleteJobResponse* response) override;
  grpc::ServerUnaryReactor* IssueJobToken(grpc::CallbackServerContext* context,
                                          const v1::IssueJobTokenRequest* request,
                                          v1::Job* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* ExcludeNode(grpc::CallbackServerContext* context,
                                        const v1::ExcludeNodeRequest* request,
                                        v1::Job* response) override;
  grpc::ServerUnaryReactor* DrainNode(grpc::CallbackServerContext* context,
                                      const v1::DrainNodeRequest* request,
                                      v1::DrainNodeResponse* response) override;
  grpc::ServerUnaryReactor* GetJobStacks(grpc::CallbackServerContext* context,
                                         const v1::GetJobStacksRequest* request,
                                         v1::JobStacks* response) override;

 private:
  // Fills `response` with the job (with nodes; `run` 0: the current run)
  // after `status`, and finishes.
  grpc::ServerUnaryReactor* FinishWithJob(grpc::CallbackServerContext* context, absl::Status status,
                                          const std::string& job_id, v1::Job* response,
                                          int run = 0);

  RendezvousService& rendezvous_;
  const GrpcJobServiceOptions options_;
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_GRPC_JOB_SERVICE_H_
