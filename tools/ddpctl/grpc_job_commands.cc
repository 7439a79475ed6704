// The `jobs ...` handlers of ddpctl: one ddp.v1.JobService call each (jobs
// list adds one GetJob per job, since ListJobs leaves members out), printed
// with output.h. Exit codes and error lines are RunInvocation's.

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "ddp/v1/jobs.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/ddpctl/grpc_command_context.h"
#include "tools/ddpctl/job_logs.h"
#include "tools/ddpctl/json_output.h"
#include "tools/ddpctl/output.h"

namespace ddp::ddpctl {
namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

// The text of the job a mutating call returned (CommandContext::Print): one
// summary line, and the token when the call issued one.
void JobSummaryTextTo(std::ostream& out, const v1::Job& job) {
  out << JobSummaryText(job) << "\n";
  // A token comes only from CreateJob and IssueJobToken, once.
  if (!job.token().empty()) {
    out << "token: " << job.token() << "\n(give it to the job's agents as DDP_TOKEN or "
        << "--token-file; the coordinator keeps only its hash)\n";
  }
}

// Reads an int flag that must lie in [min, kMaxInt32]; `*value` keeps its
// default when the flag is absent.
absl::Status Int32Flag(const Invocation& invocation, const std::string& name, int64_t min,
                       int32_t* value) {
  if (!invocation.HasFlag(name)) return absl::OkStatus();
  const int64_t given = invocation.FlagInt64(name, min);
  if (given < min || given > kMaxInt32) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", given, " must be in [", min, ", ", kMaxInt32, "]"));
  }
  *value = static_cast<int32_t>(given);
  return absl::OkStatus();
}

// Milliseconds of a duration flag into `*ms`, which keeps 0 (the server's
// default) when the flag is absent.
absl::Status DurationFlagMs(const Invocation& invocation, const std::string& name, int64_t* ms) {
  if (!invocation.HasFlag(name)) return absl::OkStatus();
  *ms = absl::ToInt64Milliseconds(invocation.FlagDuration(name, absl::ZeroDuration()));
  if (*ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", invocation.FlagString(name), " must be >= 1ms"));
  }
  return absl::OkStatus();
}

grpc::Status JobsList(CommandContext& c) {
  v1::ListJobsRequest request;
  for (const std::string& name : SplitFlagValues(c.invocation.FlagString("state"))) {
    absl::StatusOr<v1::JobState> state = ParseJobState(name);
    if (!state.ok()) return UsageError(state.status());
    request.add_states(*state);
  }
  const bool all_runs = c.invocation.HasFlag("all-runs");
  request.set_include_past_runs(all_runs);
  v1::ListJobsResponse listed;
  grpc::Status status = c.Call(c.jobs, &v1::JobService::Stub::ListJobs, request, &listed);
  if (!status.ok()) return status;
  std::vector<v1::Job> jobs;
  for (const v1::Job& summary : listed.jobs()) {
    v1::GetJobRequest get;
    get.set_job_id(summary.job_id());
    get.set_run(summary.run());
    v1::Job job;
    status = c.Call(c.jobs, &v1::JobService::Stub::GetJob, get, &job);
    // A job removed between the two calls is no longer listed.
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) continue;
    if (!status.ok()) return status;
    jobs.push_back(std::move(job));
  }
  if (c.json()) {
    for (const v1::Job& job : jobs) c.out << CliJson(job) << "\n";
  } else {
    c.out << JobListText(jobs, all_runs);
  }
  return grpc::Status::OK;
}

grpc::Status JobsGet(CommandContext& c) {
  v1::GetJobRequest request;
  request.set_job_id(c.arg(0));
  if (c.invocation.HasFlag("run")) {
    const int64_t run = c.invocation.FlagInt64("run", 0);
    if (run < 1 || run > INT32_MAX) {
      return UsageError(absl::InvalidArgumentError(
          absl::StrCat("--run=", c.invocation.FlagString("run"), " must be in [1, 2147483647]")));
    }
    request.set_run(static_cast<int32_t>(run));
  }
  return c.CallAndPrint(c.jobs, &v1::JobService::Stub::GetJob, request,
                        [](std::ostream& out, const v1::Job& job) { out << JobText(job); });
}

grpc::Status JobsLogs(CommandContext& c) {
  const Invocation& in = c.invocation;
  JobLogsFilter filter;
  for (const char* name : {"rank", "generation"}) {
    if (!in.HasFlag(name)) continue;
    const int64_t value = in.FlagInt64(name, -1);
    if (value < 0) {
      return UsageError(absl::InvalidArgumentError(
          absl::StrCat("--", name, "=", in.FlagString(name), " must be 0 or more")));
    }
    (std::string(name) == "rank" ? filter.global_rank : filter.generation) = value;
  }
  v1::GetJobRequest request;
  request.set_job_id(c.arg(0));
  v1::Job job;
  grpc::Status status = c.Call(c.jobs, &v1::JobService::Stub::GetJob, request, &job);
  if (!status.ok()) return status;
  absl::StatusOr<std::vector<v1::Failure>> failures = SelectFailureLogs(job, filter);
  if (!failures.ok()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, std::string(failures.status().message()));
  }
  if (c.json()) {
    for (const v1::Failure& f : *failures) c.out << CliJson(f) << "\n";
  } else {
    c.out << FailureLogsText(*failures);
  }
  return grpc::Status::OK;
}

grpc::Status JobsStacks(CommandContext& c) {
  v1::GetJobStacksRequest request;
  request.set_job_id(c.arg(0));
  const absl::Duration wait = c.invocation.FlagDuration("wait", absl::Seconds(5));
  if (wait <= absl::ZeroDuration() || wait > absl::Seconds(60)) {
    return UsageError(absl::InvalidArgumentError(
        absl::StrCat("--wait=", c.invocation.FlagString("wait"), " must be in (0s, 60s]")));
  }
  request.set_timeout_ms(absl::ToInt64Milliseconds(wait));
  request.set_at_last_hang(c.invocation.HasFlag("at-hang"));
  return c.CallAndPrint(
      c.jobs, &v1::JobService::Stub::GetJobStacks, request,
      [](std::ostream& out, const v1::JobStacks& stacks) { out << JobStacksText(stacks); }, wait);
}

grpc::Status JobsCreate(CommandContext& c) {
  const Invocation& in = c.invocation;
  v1::CreateJobRequest request;
  request.set_job_id(c.arg(0));
  v1::JobSettings& settings = *request.mutable_settings();
  if (in.HasFlag("nnodes")) {
    absl::StatusOr<NodeRange> range = ParseNodeRange(in.FlagString("nnodes"), "--nnodes");
    if (!range.ok()) return UsageError(range.status());
    settings.set_min_nodes(range->min_nodes);
    settings.set_max_nodes(range->max_nodes);
  }
  int32_t nproc = 0;
  int32_t max_restarts = 0;
  int64_t join_ms = 0;
  int64_t last_call_ms = 0;
  int64_t heartbeat_ms = 0;
  int64_t shutdown_ms = 0;
  for (absl::Status flag :
       {Int32Flag(in, "nproc-per-node", 1, &nproc), Int32Flag(in, "max-restarts", 0, &max_restarts),
        DurationFlagMs(in, "join-timeout", &join_ms),
        DurationFlagMs(in, "last-call-timeout", &last_call_ms),
        DurationFlagMs(in, "heartbeat-timeout", &heartbeat_ms),
        DurationFlagMs(in, "shutdown-timeout", &shutdown_ms)}) {
    if (!flag.ok()) return UsageError(flag);
  }
  settings.set_nproc_per_node(nproc);
  settings.set_max_restarts(max_restarts);
  settings.set_join_timeout_ms(join_ms);
  settings.set_last_call_timeout_ms(last_call_ms);
  settings.set_heartbeat_timeout_ms(heartbeat_ms);
  settings.set_shutdown_timeout_ms(shutdown_ms);
  if (in.HasFlag("hang-timeout")) {  // unset: the coordinator's 10 s; 0: off
    const absl::Duration hang = in.FlagDuration("hang-timeout", absl::ZeroDuration());
    if (hang < absl::ZeroDuration()) {
      return UsageError(absl::InvalidArgumentError(absl::StrCat(
          "--hang-timeout=", in.FlagString("hang-timeout"), " must be 0 (off) or positive")));
    }
    settings.set_hang_timeout_ms(absl::ToInt64Milliseconds(hang));
  }
  return c.CallAndPrint(c.jobs, &v1::JobService::Stub::CreateJob, request, JobSummaryTextTo);
}

grpc::Status JobsToken(CommandContext& c) {
  v1::IssueJobTokenRequest request;
  request.set_job_id(c.arg(0));
  request.set_revoke(c.invocation.HasFlag("revoke"));
  v1::Job job;
  grpc::Status status = c.Call(c.jobs, &v1::JobService::Stub::IssueJobToken, request, &job);
  if (!status.ok()) return status;
  if (c.json()) {
    c.out << CliJson(job) << "\n";
  } else if (request.revoke()) {
    c.out << "job " << c.arg(0) << " has no token any more\n";
  } else {
    // The token alone on stdout (TOKEN=$(ddpctl jobs token J)); the rest is
    // for the user.
    c.out << job.token() << "\n";
    c.err << JobSummaryText(job) << "\n(give the token to the job's agents as DDP_TOKEN or "
          << "--token-file; the coordinator keeps only its hash)\n";
  }
  return grpc::Status::OK;
}

grpc::Status JobsWatch(CommandContext& c) {
  const int64_t from = c.invocation.FlagInt64("from-index", 1);
  if (from < 0) {
    return UsageError(absl::InvalidArgumentError(
        absl::StrCat("--from-index=", from, " must be >= 0 (0: only new events)")));
  }
  int64_t next = from;
  bool moved_on = false;
  while (true) {
    v1::WatchJobRequest request;
    request.set_job_id(c.arg(0));
    request.set_from_index(next);
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = c.jobs.WatchJob(&context, request);
    grpc::Status status;
    bool read_any = false;
    {
      CancelOnStop cancel_on_stop(context, c.stop);
      v1::JobEvent event;
      while (reader->Read(&event)) {
        read_any = true;
        c.out << (c.json() ? CliJson(event) : JobEventText(event)) << "\n";
        c.out.flush();
      }
      status = reader->Finish();
    }
    if (c.stop.HasBeenNotified()) return grpc::Status::OK;
    if (status.error_code() != grpc::StatusCode::OUT_OF_RANGE || read_any || moved_on) {
      return status;
    }
    // The events asked for are gone (beyond the bound the coordinator keeps per
    // job, or stored by a release that kept none): start from the oldest one
    // kept, and say so.
    grpc::ClientContext get_context;
    v1::GetJobRequest get;
    get.set_job_id(c.arg(0));
    v1::Job job;
    grpc::Status got = c.jobs.GetJob(&get_context, get, &job);
    if (!got.ok()) return status;
    next = job.first_event_index() > 0 ? job.first_event_index() : 0;
    moved_on = true;
    c.err << "ddpctl: events " << from << " to " << (next > 0 ? next - 1 : job.last_event_index())
          << " of job " << c.arg(0)
          << " are no longer kept (the coordinator keeps the newest events of each job, "
             "across restarts, up to a bound); watching from "
          << (next > 0 ? absl::StrCat("event ", next) : std::string("the next new event")) << "\n";
  }
}

grpc::Status JobsUpdate(CommandContext& c) {
  if (!c.invocation.HasFlag("nnodes")) {
    return UsageError(
        absl::InvalidArgumentError("--nnodes MIN:MAX is required (the new node range)"));
  }
  absl::StatusOr<NodeRange> range = ParseNodeRange(c.invocation.FlagString("nnodes"), "--nnodes");
  if (!range.ok()) return UsageError(range.status());
  v1::UpdateJobRequest request;
  request.set_job_id(c.arg(0));
  request.set_min_nodes(range->min_nodes);
  request.set_max_nodes(range->max_nodes);
  return c.CallAndPrint(c.jobs, &v1::JobService::Stub::UpdateJob, request, JobSummaryTextTo);
}

grpc::Status JobsCancel(CommandContext& c) {
  v1::CancelJobRequest request;
  request.set_job_id(c.arg(0));
  request.set_reason(c.invocation.FlagString("reason"));
  return c.CallAndPrint(c.jobs, &v1::JobService::Stub::CancelJob, request, JobSummaryTextTo);
}

grpc::Status JobsDelete(CommandContext& c) {
  if (c.invocation.FlagString("force") == "true") {
    v1::CancelJobRequest cancel;
    cancel.set_job_id(c.arg(0));
    cancel.set_reason("deleted with ddpctl jobs delete --force");
    v1::Job job;
    grpc::Status status = c.Call(c.jobs, &v1::JobService::Stub::CancelJob, cancel, &job);
    // A job that already finished refuses the cancel: delete it all the same.
    if (!status.ok() && status.error_code() != grpc::StatusCode::FAILED_PRECONDITION) {
      return status;
    }
  }
  v1::DeleteJobRequest request;
  request.set_job_id(c.arg(0));
  v1::DeleteJobResponse response;
  grpc::Status status = c.Call(c.jobs, &v1::JobService::Stub::DeleteJob, request, &response);
  if (!status.ok()) return status;
  c.out << "deleted job " << c.arg(0) << "\n";
  return grpc::Status::OK;
}

grpc::Status JobsExclude(CommandContext& c) {
  v1::ExcludeNodeRequest request;
  request.set_job_id(c.arg(0));
  request.set_node_id(c.arg(1));
  request.set_reason(c.invocation.FlagString("reason"));
  return c.CallAndPrint(c.jobs, &v1::JobService::Stub::ExcludeNode, request, JobSummaryTextTo);
}

// `nodes drain NODE [--grace D] [--job JOB] [--reason TEXT]`.
grpc::Status NodesDrain(CommandContext& c) {
  v1::DrainNodeRequest request;
  request.set_node_id(c.arg(0));
  request.set_job_id(c.invocation.FlagString("job"));
  request.set_reason(c.invocation.FlagString("reason"));
  if (c.invocation.HasFlag("grace")) {
    const absl::Duration grace = c.invocation.FlagDuration("grace", absl::ZeroDuration());
    if (grace < absl::Milliseconds(1) || grace > absl::Hours(24 * 7)) {
      return UsageError(absl::InvalidArgumentError(
          absl::StrCat("--grace=", c.invocation.FlagString("grace"), " must be in [1ms, 168h]")));
    }
    request.set_grace_ms(absl::ToInt64Milliseconds(grace));
  }
  return c.CallAndPrint(c.jobs, &v1::JobService::Stub::DrainNode, request,
                        [&](std::ostream& out, const v1::DrainNodeResponse& response) {
                          out << "node " << request.node_id() << " drains from job(s) "
                              << absl::StrJoin(response.job_ids(), ", ") << "; it leaves by "
                              << absl::FormatTime(
                                     "%Y-%m-%d %H:%M:%S UTC",
                                     absl::FromUnixMillis(response.leaves_at_unix_ms()),
                                     absl::UTCTimeZone())
                              << " at the latest (earlier once the workers say they are "
                                 "ready)\n";
                        });
}

}  // namespace

std::map<std::string, Handler> JobCommandHandlers() {
  return {
      {"jobs list", JobsList},     {"jobs get", JobsGet},         {"jobs logs", JobsLogs},
      {"jobs create", JobsCreate}, {"jobs watch", JobsWatch},     {"jobs update", JobsUpdate},
      {"jobs cancel", JobsCancel}, {"jobs exclude", JobsExclude}, {"jobs delete", JobsDelete},
      {"jobs token", JobsToken},   {"jobs stacks", JobsStacks},   {"nodes drain", NodesDrain},
  };
}

}  // namespace ddp::ddpctl
