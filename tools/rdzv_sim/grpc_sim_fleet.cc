#include "tools/rdzv_sim/grpc_sim_fleet.h"

#include <pthread.h>

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/endpoint.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "tools/rdzv_sim/heartbeat_pacer.h"

namespace ddp::rdzv_sim {

GrpcSimFleet::GrpcSimFleet(SimFleetOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock), tracker_(options_.nodes) {}

absl::StatusOr<std::unique_ptr<GrpcSimFleet>> GrpcSimFleet::Create(SimFleetOptions options,
                                                                   const Clock& clock) {
  std::unique_ptr<GrpcSimFleet> fleet(new GrpcSimFleet(std::move(options), clock));
  const SimFleetOptions& o = fleet->options_;
  const gpr_timespec deadline = gpr_time_add(
      gpr_now(GPR_CLOCK_MONOTONIC),
      gpr_time_from_millis(absl::ToInt64Milliseconds(o.connect_timeout), GPR_TIMESPAN));
  for (int i = 0; i < o.channels; ++i) {
    grpc::ChannelArguments args;
    // A private subchannel pool and a distinct argument: its own connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("grpc.channel_id", i);
    if (o.keepalive > absl::ZeroDuration()) {  // HTTP/2 pings on each connection
      args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
                  static_cast<int>(absl::ToInt64Milliseconds(o.keepalive)));
      args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                  3 * static_cast<int>(absl::ToInt64Milliseconds(o.keepalive)));
      args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
      args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    }
    fleet->channels_.push_back(
        grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args));
    fleet->channels_.back()->GetState(/*try_to_connect=*/true);
  }
  for (int i = 0; i < o.channels; ++i) {
    if (!fleet->channels_[i]->WaitForConnected(deadline)) {
      return absl::UnavailableError(absl::StrCat(
          "channel ", i, " to ", o.target, " did not connect within ",
          absl::FormatDuration(o.connect_timeout), "; is the coordinator serving there?"));
    }
    fleet->stubs_.push_back(v1::SessionService::NewStub(fleet->channels_[i]));
  }
  fleet->queues_ = std::make_unique<AsyncClientQueues>(o.completion_queues);
  auto datagrams = SimDatagrams::Create(EndpointHost(o.target), std::max(o.heartbeat_threads, 1));
  if (!datagrams.ok()) return datagrams.status();
  fleet->datagrams_ = *std::move(datagrams);
  std::mt19937_64 random(o.seed);
  for (int i = 0; i < o.nodes; ++i) {
    SimAgentIdentity id;
    id.job_id = o.job_id;
    id.node_id = absl::StrFormat("sim-%05d", i);
    do {
      id.incarnation = random();
    } while (id.incarnation == 0);
    id.nproc = o.nproc;
    fleet->streams_.push_back(std::make_unique<GrpcAgentStream>(
        std::move(id), o.settings, fleet->tracker_, fleet->counters_, clock, o.ack_heartbeats,
        fleet->datagrams_.get(), i));
  }
  return fleet;
}

GrpcSimFleet::~GrpcSimFleet() {
  absl::Status status = Shutdown(absl::Seconds(10));
  if (!status.ok()) DDP_LOG(WARNING) << "fleet shutdown: " << status;
}

void GrpcSimFleet::PacerLoop(int begin, int end) {
  const absl::Duration interval = absl::Milliseconds(options_.settings.heartbeat_interval_ms());
  HeartbeatPacer pacer(end - begin, interval, clock_.Now());
  std::vector<int> due;
  SimDatagrams::Outbox outbox(*datagrams_);
  absl::MutexLock lock(&mu_);
  absl::Time last_round = clock_.Now();
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.pacer_tick);
    if (stopping_) break;
    due.clear();
    const absl::Time now = clock_.Now();
    const int64_t skipped_before = pacer.skipped();
    pacer.TakeDue(now, &due);
    pacer_skipped_ += pacer.skipped() - skipped_before;
    longest_pacer_pause_ = std::max(longest_pacer_pause_, now - last_round);
    last_round = now;
    mu_.Unlock();
    for (int index : due) streams_[begin + index]->SendHeartbeat(outbox);
    outbox.Flush();
    mu_.Lock();
  }
}

SimPacing GrpcSimFleet::pacing() const {
  absl::MutexLock lock(&mu_);
  SimPacing pacing;
  pacing.longest_pause = longest_pacer_pause_;
  pacing.skipped = pacer_skipped_;
  pacing.dropped_while_queued = counters_.heartbeats_dropped.load();
  return pacing;
}

absl::StatusOr<WaveTiming> GrpcSimFleet::Rendezvous(absl::Time deadline) {
  if (assignments_seen_ != 0 || shut_down_) {
    return absl::FailedPreconditionError("Rendezvous runs once, first");
  }
  const int threads = std::clamp(options_.heartbeat_threads, 1, std::max(options_.nodes, 1));
  for (int t = 0; t < threads; ++t) {
    const int begin = options_.nodes * t / threads;
    const int end = options_.nodes * (t + 1) / threads;
    pacers_.emplace_back([this, begin, end, t] {
      pthread_setname_np(pthread_self(), absl::StrCat("rdzv-hb-", t).c_str());
      PacerLoop(begin, end);
    });
  }
  streams_started_ = true;
  const absl::Time started = clock_.Now();
  for (size_t i = 0; i < streams_.size(); ++i) {
    streams_[i]->Start(*stubs_[i % stubs_.size()], queues_->queue(i));
  }
  WaveTiming timing;
  timing.issue_spread = clock_.Now() - started;
  DDP_ASSIGN_OR_RETURN(AssignmentWave wave, tracker_.WaitForAssignments(1, deadline));
  assignments_seen_ = 1;
  timing.elapsed = wave.last - started;
  timing.generation = wave.max_generation;
  return timing;
}

absl::StatusOr<WaveTiming> GrpcSimFleet::Restart(absl::Time deadline) {
  if (assignments_seen_ < 1 || shut_down_) {
    return absl::FailedPreconditionError("Restart needs a rendezvous first");
  }
  const absl::Time started = clock_.Now();
  DDP_RETURN_IF_ERROR(streams_[streams_.size() / 2]->SendWorkerExited(1));
  WaveTiming timing;
  timing.issue_spread = clock_.Now() - started;
  DDP_ASSIGN_OR_RETURN(AssignmentWave wave,
                       tracker_.WaitForAssignments(assignments_seen_ + 1, deadline));
  ++assignments_seen_;
  timing.elapsed = wave.last - started;
  timing.generation = wave.max_generation;
  return timing;
}

void GrpcSimFleet::StopPacers() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : pacers_) t.join();
  pacers_.clear();
}

absl::Status GrpcSimFleet::Shutdown(absl::Duration timeout) {
  if (shut_down_) return absl::OkStatus();
  shut_down_ = true;
  StopPacers();
  absl::Status status;
  if (streams_started_) {
    std::unique_ptr<v1::JobService::Stub> jobs = v1::JobService::NewStub(channels_[0]);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    v1::CancelJobRequest request;
    request.set_job_id(options_.job_id);
    request.set_reason("rdzv_sim finished");
    v1::Job job;
    status = FromGrpcStatus(jobs->CancelJob(&context, request, &job));
  }
  if (!streams_started_) {
    streams_.clear();  // never bound to a call
    return status;
  }
  if (!tracker_.WaitForStreamsDone(absl::Now() + timeout)) {
    for (auto& stream : streams_) stream->Cancel();
    if (!tracker_.WaitForStreamsDone(absl::Now() + timeout)) {
      for (auto& stream : streams_) stream.release();  // still owned by gRPC
      queues_.release();                               // their threads may still run those streams
      return absl::DeadlineExceededError(absl::StrCat("only ", tracker_.streams_done(), " of ",
                                                      streams_.size(), " streams ended within ",
                                                      absl::FormatDuration(timeout)));
    }
  }
  streams_.clear();
  queues_->Stop();
  return status;
}

}  // namespace ddp::rdzv_sim
