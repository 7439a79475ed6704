#include "coordinator/session/grpc_job_service.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "coordinator/rpc/call_auth.h"
#include "coordinator/session/grpc_job_watch_reactor.h"
#include "coordinator/session/job_proto_convert.h"
#include "google/protobuf/util/message_differencer.h"

namespace ddp::session {
namespace {

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Scheduler-supplied reasons are cut before they are copied into the core.
// DrainNodeRequest.grace_ms 0 (jobs.proto).
constexpr absl::Duration kDefaultDrainGrace = absl::Seconds(120);

std::string CappedReason(const std::string& reason, const rendezvous::RendezvousLimits& limits) {
  return reason.substr(0, static_cast<size_t>(limits.max_message_length));
}

}  // namespace

GrpcJobService::GrpcJobService(RendezvousService& rendezvous, GrpcJobServiceOptions options)
    : rendezvous_(rendezvous), options_(options) {}

grpc::ServerUnaryReactor* GrpcJobService::FinishWithJob(grpc::CallbackServerContext* context,
                                                        absl::Status status,
                                                        const std::string& job_id,
                                                        v1::Job* response, int run) {
  if (status.ok()) {
    absl::StatusOr<v1::Job> job = rendezvous_.GetJob(job_id, /*include_nodes=*/true, run);
    // The core's answer as it is (CreateJob's reply already holds the token).
    if (job.ok()) response->MergeFrom(*job);
    status = job.status();
  }
  return FinishNow(context, status);
}

grpc::ServerUnaryReactor* GrpcJobService::CreateJob(grpc::CallbackServerContext* context,
                                                    const v1::CreateJobRequest* request,
                                                    v1::Job* response) {
  if (absl::Status allowed = rpc::AuthorizeCall(options_.authorizer, *context,
                                                "/ddp.v1.JobService/CreateJob", request->job_id());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  const rendezvous::RendezvousLimits& limits = rendezvous_.limits();
  absl::Status status = rendezvous::ValidateId(request->job_id(), "job id", limits);
  if (status.ok() && !request->has_settings()) {
    status = absl::InvalidArgumentError(
        absl::StrCat("CreateJob of job '", request->job_id(),
                     "' has no settings; set min_nodes, max_nodes, nproc_per_node, "
                     "max_restarts and the timeouts"));
  }
  if (!status.ok()) return FinishNow(context, status);
  const rendezvous::JobSettings settings = rendezvous::RequestedSettings(request->settings());
  // With authorization on, every new job gets its own token (its hash is
  // stored with the job; the token itself is in this reply only).
  const bool with_token = options_.authorizer != nullptr && options_.authorizer->enabled();
  const std::string token = with_token ? auth::NewToken() : "";
  const std::string token_hash = with_token ? auth::HashToken(token) : "";
  absl::StatusOr<v1::Job> created = rendezvous_.CreateJob(request->job_id(), settings, token_hash);
  if (created.ok() && with_token) {
    options_.authorizer->SetJobTokenHash(request->job_id(), token_hash);
    response->set_token(token);
  }
  if (absl::IsAlreadyExists(created.status())) {
    absl::StatusOr<v1::Job> existing = rendezvous_.GetJob(request->job_id(), false);
    if (existing.ok() &&
        !google::protobuf::util::MessageDifferencer::Equals(existing->settings(), settings)) {
      return FinishNow(context, absl::AlreadyExistsError(
                                    absl::StrCat("job '", request->job_id(),
                                                 "' already exists with other settings; use "
                                                 "another job id or UpdateJob")));
    }
    created = existing;  // same settings: CreateJob is idempotent
  }
  return FinishWithJob(context, created.status(), request->job_id(), response);
}

grpc::ServerUnaryReactor* GrpcJobService::GetJob(grpc::CallbackServerContext* context,
                                                 const v1::GetJobRequest* request,
                                                 v1::Job* response) {
  if (absl::Status allowed = rpc::AuthorizeCall(options_.authorizer, *context,
                                                "/ddp.v1.JobService/GetJob", request->job_id());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  if (request->run() < 0) {
    return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                                  "GetJob of job '", rendezvous::Capped(request->job_id()),
                                  "': run ", request->run(), " is negative (0: the current run)")));
  }
  return FinishWithJob(context, absl::OkStatus(), request->job_id(), response, request->run());
}

grpc::ServerUnaryReactor* GrpcJobService::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request,
                                                   v1::ListJobsResponse* response) {
  if (absl::Status allowed =
          rpc::AuthorizeCall(options_.authorizer, *context, "/ddp.v1.JobService/ListJobs", "");
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  // A job's token lists that job alone.
  const auth::Identity caller = rpc::CallIdentity(options_.authorizer, *context);
  absl::flat_hash_set<int> wanted;
  for (int state : request->states()) {
    absl::StatusOr<rendezvous::JobState> parsed =
        rendezvous::JobStateFromProto(static_cast<v1::JobState>(state));
    if (!parsed.ok()) return FinishNow(context, parsed.status());
    wanted.insert(state);
  }
  absl::StatusOr<std::vector<v1::Job>> jobs = rendezvous_.ListJobs(request->include_past_runs());
  if (!jobs.ok()) return FinishNow(context, jobs.status());
  for (v1::Job& job : *jobs) {
    if (!wanted.empty() && !wanted.contains(job.state())) continue;
    if (caller.kind == auth::Identity::Kind::kJob && caller.job_id != job.job_id()) continue;
    *response->add_jobs() = std::move(job);
  }
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerWriteReactor<v1::JobEvent>* GrpcJobService::WatchJob(
    grpc::CallbackServerContext* context, const v1::WatchJobRequest* request) {
  const auth::Identity identity = rpc::CallIdentity(options_.authorizer, *context);
  if (absl::Status allowed = rpc::AuthorizeCall(options_.authorizer, identity,
                                                "/ddp.v1.JobService/WatchJob", request->job_id());
      !allowed.ok()) {
    return new rpc::RefusedStream<v1::JobEvent>(allowed);
  }
  return new JobWatchReactor(rendezvous_, *request, options_, identity);
}

grpc::ServerUnaryReactor* GrpcJobService::UpdateJob(grpc::CallbackServerContext* context,
                                                    const v1::UpdateJobRequest* request,
                                                    v1::Job* response) {
  if (absl::Status allowed = rpc::AuthorizeCall(options_.authorizer, *context,
                                                "/ddp.v1.JobService/UpdateJob", request->job_id());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  absl::Status status =
      rendezvous_.UpdateJob(request->job_id(), request->min_nodes(), request->max_nodes());
  return FinishWithJob(context, status, request->job_id(), response);
}

grpc::ServerUnaryReactor* GrpcJobService::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* request,
                                                    v1::Job* response) {
  if (absl::Status allowed = rpc::AuthorizeCall(options_.authorizer, *context,
                                                "/ddp.v1.JobService/CancelJob", request->job_id());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  absl::Status status = rendezvous_.CancelJob(
      request->job_id(), CappedReason(request->reason(), rendezvous_.limits()));
  return FinishWithJob(context, status, request->job_id(), response);
}

grpc::ServerUnaryReactor* GrpcJobService::DeleteJob(grpc::CallbackServerContext* context,
                                                    const v1::DeleteJobRequest* request,
                                                    v1::DeleteJobResponse* /*response*/) {
  if (absl::Status allowed = rpc::AuthorizeCall(options_.authorizer, *context,
                                                "/ddp.v1.JobService/DeleteJob", request->job_id());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  absl::Status status = rendezvous::ValidateId(request->job_id(), "job id", rendezvous_.limits());
  if (status.ok()) status = rendezvous_.RemoveJob(request->job_id());
  if (status.ok() && options_.authorizer != nullptr) {
    options_.authorizer->SetJobTokenHash(request->job_id(), "");
  }
  return FinishNow(context, status);
}

grpc::ServerUnaryReactor* GrpcJobService::IssueJobToken(grpc::CallbackServerContext* context,
                                                        const v1::IssueJobTokenRequest* request,
                                                        v1::Job* response) {
  if (absl::Status allowed = rpc::AuthorizeCall(
          options_.authorizer, *context, "/ddp.v1.JobService/IssueJobToken", request->job_id());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  if (options_.authorizer == nullptr || !options_.authorizer->enabled()) {
    return FinishNow(context, absl::FailedPreconditionError(
                                  "authorization is off (no --admin-token-file): jobs have no "
                                  "tokens"));
  }
  absl::Status status = rendezvous::ValidateId(request->job_id(), "job id", rendezvous_.limits());
  const std::string token = request->revoke() ? "" : auth::NewToken();
  const std::string token_hash = request->revoke() ? "" : auth::HashToken(token);
  if (status.ok()) status = rendezvous_.SetJobTokenHash(request->job_id(), token_hash);
  if (status.ok()) {
    // The old token stops working now; the new one once durable (above).
    options_.authorizer->SetJobTokenHash(request->job_id(), token_hash);
    response->set_token(token);
  }
  return FinishWithJob(context, status, request->job_id(), response);
}

grpc::ServerUnaryReactor* GrpcJobService::ExcludeNode(grpc::CallbackServerContext* context,
                                                      const v1::ExcludeNodeRequest* request,
                                                      v1::Job* response) {
  if (absl::Status allowed = rpc::AuthorizeCall(
          options_.authorizer, *context, "/ddp.v1.JobService/ExcludeNode", request->job_id());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  const rendezvous::RendezvousLimits& limits = rendezvous_.limits();
  absl::Status status = rendezvous::ValidateId(request->node_id(), "node id", limits);
  if (status.ok()) {
    status = rendezvous_.ExcludeNode(request->job_id(), request->node_id(),
                                     CappedReason(request->reason(), limits));
  }
  return FinishWithJob(context, status, request->job_id(), response);
}

grpc::ServerUnaryReactor* GrpcJobService::DrainNode(grpc::CallbackServerContext* context,
                                                    const v1::DrainNodeRequest* request,
                                                    v1::DrainNodeResponse* response) {
  if (absl::Status allowed = rpc::AuthorizeCall(options_.authorizer, *context,
                                                "/ddp.v1.JobService/DrainNode", request->job_id());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  const rendezvous::RendezvousLimits& limits = rendezvous_.limits();
  absl::Status status = rendezvous::ValidateId(request->node_id(), "node id", limits);
  if (status.ok() && !request->job_id().empty()) {
    status = rendezvous::ValidateId(request->job_id(), "job id", limits);
  }
  if (status.ok() && (request->grace_ms() < 0 ||
                      request->grace_ms() > absl::ToInt64Milliseconds(limits.max_timeout))) {
    status = absl::InvalidArgumentError(
        absl::StrCat("grace_ms=", request->grace_ms(), " is out of range: it must be in [0, ",
                     absl::ToInt64Milliseconds(limits.max_timeout),
                     "] (0: ", absl::ToInt64Milliseconds(kDefaultDrainGrace), ")"));
  }
  if (!status.ok()) return FinishNow(context, status);
  const absl::Duration grace =
      request->grace_ms() == 0 ? kDefaultDrainGrace : absl::Milliseconds(request->grace_ms());
  const absl::Time leaves_at = rendezvous_.Now() + grace;
  absl::StatusOr<std::vector<std::string>> jobs =
      rendezvous_.DrainNode(request->node_id(), request->job_id(), leaves_at,
                            request->reason().empty() ? "drained by the operator"
                                                      : CappedReason(request->reason(), limits));
  if (jobs.ok()) {
    for (const std::string& id : *jobs) response->add_job_ids(id);
    response->set_leaves_at_unix_ms(absl::ToUnixMillis(leaves_at));
  }
  return FinishNow(context, jobs.status());
}

grpc::ServerUnaryReactor* GrpcJobService::GetJobStacks(grpc::CallbackServerContext* context,
                                                       const v1::GetJobStacksRequest* request,
                                                       v1::JobStacks* response) {
  if (absl::Status allowed = rpc::AuthorizeCall(
          options_.authorizer, *context, "/ddp.v1.JobService/GetJobStacks", request->job_id());
      !allowed.ok()) {
    return FinishNow(context, allowed);
  }
  if (options_.stack_collector == nullptr) {
    return FinishNow(context, absl::UnimplementedError("this coordinator collects no stacks"));
  }
  if (request->at_last_hang()) {
    absl::StatusOr<v1::JobStacks> stacks =
        options_.stack_collector->LastHangStacks(request->job_id());
    if (stacks.ok()) *response = std::move(*stacks);
    return FinishNow(context, stacks.status());
  }
  constexpr int64_t kMaxTimeoutMs = 60'000;
  if (request->timeout_ms() < 0 || request->timeout_ms() > kMaxTimeoutMs) {
    return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                                  "GetJobStacks: timeout_ms ", request->timeout_ms(),
                                  " is out of range [0, ", kMaxTimeoutMs, "] (0: 5000)")));
  }
  absl::StatusOr<v1::Job> job = rendezvous_.GetJob(request->job_id(), /*include_nodes=*/true);
  if (!job.ok()) return FinishNow(context, job.status());
  if (job->state() != v1::RUNNING && job->state() != v1::RESTARTING) {
    return FinishNow(context,
                     absl::FailedPreconditionError(absl::StrCat(
                         "job '", request->job_id(), "' is ",
                         rendezvous::JobStateName(*rendezvous::JobStateFromProto(job->state())),
                         ": it has no workers to take stacks of (RUNNING or RESTARTING)")));
  }
  // The generation's members in group-rank order (the job lists them so):
  // their ranks follow each other (RANK = global_rank_offset + LOCAL_RANK).
  std::vector<StackCollector::Node> nodes;
  int64_t offset = 0;
  for (const v1::Member& n : job->members()) {
    if (n.group_rank() < 0) continue;
    nodes.push_back(StackCollector::Node{n.node_id(), n.incarnation(), offset, n.nproc()});
    offset += n.nproc();
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Status started = options_.stack_collector->Collect(
      request->job_id(), job->generation(), std::move(nodes),
      absl::Milliseconds(request->timeout_ms()), [reactor, response](v1::JobStacks stacks) {
        *response = std::move(stacks);
        reactor->Finish(grpc::Status::OK);
      });
  if (!started.ok()) reactor->Finish(ToGrpcStatus(started));
  return reactor;
}

}  // namespace ddp::session
