#include "coordinator/session/job_proto_convert.h"

#include <algorithm>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ddp::session {
namespace {

using rendezvous::JobState;

int64_t ToMs(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

int64_t ToUnixMs(absl::Time t) {
  if (t == absl::Time() || t == absl::InfinitePast()) return 0;
  return absl::ToUnixMillis(t);
}

absl::Status CheckLength(const std::string& value, size_t limit, const char* what) {
  if (value.size() <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " '", rendezvous::Capped(value), "' is ",
                                                 value.size(), " bytes; the limit is ", limit));
}

absl::Status CheckIds(const std::string& job_id, const std::string& node_id,
                      const rendezvous::RendezvousLimits& limits) {
  const size_t max_id = static_cast<size_t>(limits.max_id_length);
  absl::Status status = CheckLength(job_id, max_id, "job id");
  if (status.ok()) status = CheckLength(node_id, max_id, "node id");
  return status;
}

}  // namespace

v1::JobState JobStateToProto(JobState state) {
  switch (state) {
    case JobState::kWaiting:
      return v1::WAITING;
    case JobState::kStarting:
      return v1::STARTING;
    case JobState::kRunning:
      return v1::RUNNING;
    case JobState::kRestarting:
      return v1::RESTARTING;
    case JobState::kSucceeded:
      return v1::SUCCEEDED;
    case JobState::kFailed:
      return v1::FAILED;
    case JobState::kCancelled:
      return v1::CANCELLED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

absl::StatusOr<JobState> JobStateFromProto(v1::JobState state) {
  switch (state) {
    case v1::WAITING:
      return JobState::kWaiting;
    case v1::STARTING:
      return JobState::kStarting;
    case v1::RUNNING:
      return JobState::kRunning;
    case v1::RESTARTING:
      return JobState::kRestarting;
    case v1::SUCCEEDED:
      return JobState::kSucceeded;
    case v1::FAILED:
      return JobState::kFailed;
    case v1::CANCELLED:
      return JobState::kCancelled;
    default:
      return absl::InvalidArgumentError(absl::StrCat("job state ", static_cast<int>(state),
                                                     " is not a state; use WAITING..CANCELLED"));
  }
}

void JobStatusToProto(const rendezvous::JobStatus& s, absl::Time now, v1::Job* proto) {
  proto->set_job_id(s.job_id);
  *proto->mutable_settings() = s.settings;
  proto->set_state(JobStateToProto(s.state));
  proto->set_generation(s.generation);
  proto->set_restart_count(s.restart_count);
  proto->set_member_count(s.member_nodes);
  proto->set_registered_nodes(s.registered_nodes);
  proto->set_world_size(s.world_size);
  // A finished job has no spares: nothing is left to replace. The nodes still
  // registered when it finished are its last generation's members (the core
  // no longer reports their ranks then: group_rank -1), listed as members so
  // that a finished job does not read as "no members, two spares".
  const bool finished = rendezvous::IsTerminal(s.state);
  auto is_member = [finished](const rendezvous::NodeStatus& n) {
    return finished || n.group_rank >= 0;
  };
  std::vector<const rendezvous::NodeStatus*> members;
  for (const rendezvous::NodeStatus& n : s.nodes) {
    if (is_member(n)) members.push_back(&n);
  }
  std::stable_sort(members.begin(), members.end(),
                   [](const auto* a, const auto* b) { return a->group_rank < b->group_rank; });
  bool contiguous = true;
  for (size_t i = 0; i < members.size(); ++i) {
    contiguous = contiguous && members[i]->group_rank == static_cast<int>(i);
  }
  auto fill = [now](const rendezvous::NodeStatus& n, v1::Member* m) {
    m->set_node_id(n.node_id);
    m->set_incarnation(n.incarnation);
    m->set_address(n.address);
    m->set_nproc(n.nproc);
    m->set_group_rank(n.group_rank);
    m->set_heartbeat_age_ms(n.last_heartbeat == absl::Time() ? -1 : ToMs(now - n.last_heartbeat));
    m->set_connected(n.connected);
    for (const rendezvous::WorkerProgress& p : n.progress) {
      v1::WorkerProgress* out = m->add_progress();
      out->set_local_rank(p.local_rank);
      out->set_global_rank(-1);  // a member's is set below
      out->set_generation(p.generation);
      out->set_step(p.step);
      out->set_steps_per_second(p.steps_per_second);
      out->set_age_ms(std::max<int64_t>(0, ToMs(now - p.reported)));
      out->set_relative_speed(p.relative_speed);
      out->set_straggler(p.straggler);
      for (const auto& [name, value] : p.metrics) (*out->mutable_metrics())[name] = value;
      if (p.checkpoint) {
        out->set_checkpoint_unix_ms(ToUnixMs(*p.checkpoint));
        out->set_checkpoint_step(p.checkpoint_step);
      }
    }
    if (n.leaves_at) {
      m->set_leaves_at_unix_ms(ToUnixMs(*n.leaves_at));
      m->set_drain_reason(n.drain_reason);
    }
  };
  int64_t offset = 0;
  for (const rendezvous::NodeStatus* n : members) {
    v1::Member* m = proto->add_members();
    fill(*n, m);
    m->set_global_rank_offset(contiguous ? offset : -1);
    for (v1::WorkerProgress& p : *m->mutable_progress()) {
      p.set_global_rank(contiguous ? offset + p.local_rank() : -1);
    }
    offset += n->nproc;
  }
  for (const rendezvous::NodeStatus& n : s.nodes) {
    if (!is_member(n)) fill(n, proto->add_spares());
  }
  proto->mutable_failures()->Assign(s.failures.begin(), s.failures.end());
  if (s.root_cause) *proto->mutable_root_cause() = *s.root_cause;
  proto->set_message(s.finish_message);
  for (const std::string& node : s.excluded_nodes) {
    proto->add_excluded_nodes(node);
  }
  proto->set_last_event_index(s.last_event_index);
  proto->set_first_event_index(s.first_event_index);
  if (s.created != absl::Time()) {
    proto->set_created_unix_ms(absl::ToUnixMillis(s.created));
  }
  proto->set_run(s.run);
  if (s.finished != absl::Time()) {
    proto->set_finished_unix_ms(absl::ToUnixMillis(s.finished));
  }
  if (s.time) *proto->mutable_time() = *s.time;
}

absl::StatusOr<rendezvous::RegisterRequest> RegisterFromProto(
    const v1::Register& proto, const rendezvous::RendezvousLimits& limits) {
  // Ids, address, role, nproc, rank and settings are the core's to check
  // (JobRegistry::Register and Job::Register, once each); here only what the
  // core never sees.
  absl::Status status = CheckLength(proto.token(), kMaxTokenBytes, "token");
  if (status.ok()) {
    status = CheckLength(proto.agent_version(), kMaxAgentVersionBytes, "agent version");
  }
  if (!status.ok()) return status;
  rendezvous::RegisterRequest r;
  r.job_id = proto.job_id();
  r.node_id = proto.node_id();
  r.incarnation = proto.incarnation();
  r.nproc = proto.nproc();
  r.requested_rank = proto.requested_rank();
  r.address = proto.address();
  r.role = proto.role().empty() ? "default" : proto.role();
  if (proto.has_settings()) r.settings = rendezvous::RequestedSettings(proto.settings());
  if (proto.generation() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Register.generation is ", proto.generation(),
                                                   "; it must be >= 0 (0: no workers)"));
  }
  r.generation = proto.generation();
  r.lease_expired = proto.lease_expired();
  return r;
}

absl::StatusOr<rendezvous::NodeRef> NodeRefFromProto(const v1::NodeHeader& proto,
                                                     const rendezvous::RendezvousLimits& limits) {
  DDP_RETURN_IF_ERROR(CheckIds(proto.job_id(), proto.node_id(), limits));
  if (proto.generation() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("header generation ", proto.generation(), " is negative"));
  }
  return rendezvous::NodeRef{proto.job_id(), proto.node_id(), proto.incarnation(),
                             proto.generation()};
}

absl::StatusOr<rendezvous::WorkerExit> WorkerExitFromProto(
    const v1::WorkerExited& proto, const rendezvous::RendezvousLimits& limits) {
  rendezvous::WorkerExit exit;
  exit.set_local_rank(proto.local_rank());
  exit.set_pid(proto.pid());
  exit.set_hang(proto.hang());
  exit.set_process_stopped(proto.process_stopped());
  // A hung worker has not exited: whatever code the agent put there (-1, so
  // that no reader takes it for a success) means nothing.
  exit.set_exit_code(proto.hang() ? 0 : proto.exit_code());
  exit.set_signal(proto.hang() ? 0 : proto.signal());
  exit.set_message(rendezvous::Utf8Prefix(proto.error_message(), limits.max_message_length));
  if (proto.hang() && exit.message().empty()) {
    exit.set_message("hang: the worker stopped touching its heartbeat file");
  }
  exit.set_time_unix_ms(std::max<int64_t>(proto.time_unix_ms(), 0));
  // Cut by the core (RendezvousLimits: the end of a tail is what matters).
  exit.set_stderr_tail(proto.stderr_tail());
  exit.set_traceback(proto.traceback());
  exit.set_log_path(proto.log_path());
  return exit;
}

absl::StatusOr<std::vector<rendezvous::WorkerProgress>> ProgressFromProto(
    const v1::Heartbeat& proto, const rendezvous::RendezvousLimits& limits, absl::Time now) {
  std::vector<rendezvous::WorkerProgress> out;
  for (const v1::WorkerState& worker : proto.workers()) {
    if (!worker.has_progress()) continue;
    const v1::WorkerProgress& p = worker.progress();
    if (worker.local_rank() < 0 || worker.local_rank() >= limits.max_nproc_per_node) {
      return absl::InvalidArgumentError(absl::StrCat("progress of local rank ", worker.local_rank(),
                                                     "; it must be in [0, ",
                                                     limits.max_nproc_per_node, ")"));
    }
    if (p.checkpoint_unix_ms() < 0 || p.checkpoint_step() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("progress of local rank ", worker.local_rank(), " has checkpoint time ",
                       p.checkpoint_unix_ms(), " ms and step ", p.checkpoint_step(),
                       "; neither may be negative"));
    }
    if (p.step() < 0 || p.age_ms() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("progress of local rank ", worker.local_rank(),
                                                     " has step ", p.step(), " and age ",
                                                     p.age_ms(), " ms; neither may be negative"));
    }
    if (p.metrics_size() > kMaxProgressMetrics) {
      return absl::InvalidArgumentError(
          absl::StrCat("progress of local rank ", worker.local_rank(), " has ", p.metrics_size(),
                       " metrics; the limit is ", kMaxProgressMetrics));
    }
    rendezvous::WorkerProgress progress;
    progress.local_rank = worker.local_rank();
    progress.step = p.step();
    progress.steps_per_second = p.steps_per_second();
    progress.reported = now - absl::Milliseconds(std::min<int64_t>(p.age_ms(), int64_t{1} << 40));
    if (p.checkpoint_unix_ms() > 0) {  // the worker's clock; a later one counts as now (Job)
      progress.checkpoint = absl::FromUnixMillis(p.checkpoint_unix_ms());
      progress.checkpoint_step = p.checkpoint_step();
    }
    for (const auto& [name, value] : p.metrics()) {
      DDP_RETURN_IF_ERROR(CheckLength(name, kMaxMetricNameBytes, "progress metric name"));
      progress.metrics[name] = value;
    }
    out.push_back(std::move(progress));
  }
  return out;
}

absl::StatusOr<std::vector<rendezvous::WorkerActivity>> ActivityFromProto(
    const v1::Heartbeat& proto, const rendezvous::RendezvousLimits& limits, absl::Time now) {
  std::vector<rendezvous::WorkerActivity> out;
  for (const v1::WorkerState& worker : proto.workers()) {
    if (worker.local_rank() < 0 || worker.local_rank() >= limits.max_nproc_per_node) {
      return absl::InvalidArgumentError(absl::StrCat("worker state of local rank ",
                                                     worker.local_rank(), "; it must be in [0, ",
                                                     limits.max_nproc_per_node, ")"));
    }
    if (worker.idle_ms() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("worker state of local rank ",
                                                     worker.local_rank(), " has idle_ms ",
                                                     worker.idle_ms(), "; it may not be negative"));
    }
    rendezvous::WorkerActivity activity;
    activity.local_rank = worker.local_rank();
    activity.running =
        worker.state() == v1::WORKER_STARTING || worker.state() == v1::WORKER_RUNNING;
    if (worker.idle_ms() > 0) {
      activity.idle_since =
          now - absl::Milliseconds(std::min<int64_t>(worker.idle_ms(), int64_t{1} << 40));
    }
    out.push_back(activity);
  }
  return out;
}

absl::StatusOr<absl::Time> LeaveAtFromProto(int64_t leave_at_unix_ms,
                                            const rendezvous::RendezvousLimits& limits,
                                            absl::Time now) {
  const absl::Time latest = now + limits.max_timeout;
  if (leave_at_unix_ms <= 0 || leave_at_unix_ms > absl::ToUnixMillis(latest)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leave_at_unix_ms=", leave_at_unix_ms, " is out of range: it must be > 0 and at most ",
        absl::FormatDuration(limits.max_timeout), " from now (", absl::ToUnixMillis(latest), ")"));
  }
  return std::max(now, absl::FromUnixMillis(leave_at_unix_ms));
}

absl::StatusOr<rendezvous::MasterInfo> MasterInfoFromProto(
    const v1::MasterInfo& proto, const rendezvous::RendezvousLimits& limits) {
  const size_t id_size = proto.nccl_unique_id().size();
  if (id_size != 0 && id_size != rendezvous::kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL unique id is ", id_size, " bytes; it must be ",
                     rendezvous::kNcclUniqueIdBytes, " (ncclGetUniqueId) or empty"));
  }
  DDP_RETURN_IF_ERROR(CheckLength(
      proto.master_addr(), static_cast<size_t>(limits.max_address_length), "master address"));
  rendezvous::MasterInfo info;
  info.master_addr = proto.master_addr();
  info.master_port = proto.master_port();
  info.nccl_unique_id = proto.nccl_unique_id();
  return info;
}

void RegisteredToProto(const rendezvous::RegisterResult& r, v1::Registered* proto) {
  *proto->mutable_settings() = r.settings;
  proto->set_state(JobStateToProto(r.state));
  proto->set_generation(r.generation);
  // The core says only "member of the current generation" or "waiting". A
  // node waiting while the rendezvous is open is a candidate of the next
  // generation (MEMBER); waiting in any other state means a spare.
  const bool member =
      r.role == rendezvous::NodeRole::kMember || r.state == rendezvous::JobState::kWaiting;
  proto->set_role(member ? v1::MEMBER : v1::SPARE);
  proto->set_created_job(r.created_job);
  proto->set_resumed(r.resumed);
  const rendezvous::WorkerLease lease = rendezvous::LeaseFor(r.settings);
  proto->set_lease_ms(absl::ToInt64Milliseconds(lease.lease));
  proto->set_lease_kill_ms(absl::ToInt64Milliseconds(lease.kill_after));
}

namespace {

struct BodyToProto {
  v1::CoordinatorMessage* proto;
  void operator()(const rendezvous::Assignment& a) const {
    v1::Assignment* m = proto->mutable_assignment();
    m->set_generation(a.generation);
    m->set_restart_count(a.restart_count);
    m->set_max_restarts(a.max_restarts);
    m->set_group_rank(a.group_rank);
    m->set_group_world_size(a.group_world_size);
    m->set_global_rank_offset(a.global_rank_offset);
    m->set_local_world_size(a.local_world_size);
    m->set_world_size(a.world_size);
    m->set_master_addr(a.master_addr);
    m->set_master_port(a.master_port);
    m->set_nccl_unique_id(a.nccl_unique_id);
    m->set_role_rank_offset(a.role_rank_offset);
    m->set_role_world_size(a.role_world_size);
  }
  void operator()(const rendezvous::RequestMasterInfo& r) const {
    proto->mutable_request_master_info()->set_generation(r.generation);
  }
  void operator()(const rendezvous::StopWorkers& s) const {
    v1::StopWorkers* m = proto->mutable_stop_workers();
    m->set_generation(s.generation);
    m->set_reason(s.reason);
    m->set_take_stacks(s.take_stacks);
  }
  void operator()(const rendezvous::JobFinished& f) const {
    v1::JobFinished* m = proto->mutable_job_finished();
    m->set_state(JobStateToProto(f.state));
    if (f.root_cause) *m->mutable_root_cause() = *f.root_cause;
    m->set_message(f.message);
  }
  void operator()(const rendezvous::Registered& r) const {
    RegisteredToProto(r.result, proto->mutable_registered());
  }
  void operator()(const rendezvous::NodeDismissed& d) const {
    proto->mutable_node_dismissed()->set_reason(d.reason);
    proto->mutable_node_dismissed()->set_drained(d.drained);
  }
  void operator()(const rendezvous::DrainNotice& d) const {
    v1::DrainNotice* m = proto->mutable_drain_notice();
    m->set_generation(d.generation);
    m->set_node_id(d.node_id);
    m->set_leave_at_unix_ms(ToUnixMs(d.leaves_at));
    m->set_reason(d.reason);
  }
  void operator()(const rendezvous::Notice& n) const {
    proto->mutable_notice()->set_message(n.message);
  }
  void operator()(const rendezvous::RequestStacks& r) const {
    proto->mutable_request_stacks()->set_request_id(r.request_id);
  }
};

}  // namespace

void OutboundToProto(const rendezvous::MessageBody& body, v1::CoordinatorMessage* proto) {
  std::visit(BodyToProto{proto}, body);
}

}  // namespace ddp::session
