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
using rendezvous::JobStateToProto;

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
    if (worker.cpu_busy_permille() < 0 ||
        worker.cpu_busy_permille() > rendezvous::kMaxCpuBusyPermille) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker state of local rank ", worker.local_rank(),
                       " has cpu_busy_permille ", worker.cpu_busy_permille(),
                       "; it must be in [0, ", rendezvous::kMaxCpuBusyPermille, "]"));
    }
    rendezvous::WorkerActivity activity;
    activity.local_rank = worker.local_rank();
    activity.cpu_busy_permille = worker.cpu_busy_permille();
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
  return rendezvous::NewMasterInfo(proto.master_addr(), proto.master_port(),
                                   proto.nccl_unique_id());
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
