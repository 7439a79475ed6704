#include "tools/rdzv_sim/grpc_agent_stream.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"

namespace ddp::rdzv_sim {
namespace {

client::SessionCoreOptions CoreOptions(const SimAgentIdentity& id, v1::JobSettings settings) {
  client::SessionCoreOptions core;
  core.registration.set_job_id(id.job_id);
  core.registration.set_node_id(id.node_id);
  core.registration.set_nproc(id.nproc);
  core.registration.set_requested_rank(-1);
  core.registration.set_address(id.address);
  *core.registration.mutable_settings() = std::move(settings);
  core.registration.set_agent_version("rdzv_sim");
  return core;
}

}  // namespace

GrpcAgentStream::GrpcAgentStream(SimAgentIdentity identity, v1::JobSettings settings,
                                 ProgressTracker& tracker, AgentStreamCounters& counters,
                                 const Clock& clock, bool ack_heartbeats, SimDatagrams* datagrams,
                                 int shard)
    : ack_heartbeats_(ack_heartbeats),
      datagrams_(datagrams),
      shard_(shard),
      tracker_(tracker),
      counters_(counters),
      clock_(clock),
      agent_(identity),
      core_(CoreOptions(identity, std::move(settings)), identity.incarnation, clock) {}

void GrpcAgentStream::Start(v1::SessionService::Stub& stub, grpc::CompletionQueue* queue) {
  v1::AgentMessage message;
  {
    absl::MutexLock lock(&mu_);
    message = core_.RegisterMessage();
    agent_.OnRegisterSent(clock_.Now());
  }
  Bind(stub.PrepareAsyncSession(&context(), queue));
  AddHold();  // released by TakeHoldReleaseLocked
  StartRead(&incoming_);
  Enqueue(std::move(message));
  StartCall();
}

void GrpcAgentStream::Enqueue(v1::AgentMessage message) {
  NextOp op = NextOp::kNone;
  {
    absl::MutexLock lock(&mu_);
    if (writes_stopped_ || close_requested_) return;
    if (!message.has_register_()) ++stream_messages_;
    queue_.push_back(std::move(message));
    op = TakeNextOpLocked();
  }
  StartOp(op);
}

void GrpcAgentStream::CloseWrites() {
  NextOp op = NextOp::kNone;
  {
    absl::MutexLock lock(&mu_);
    close_requested_ = true;
    op = TakeNextOpLocked();
  }
  StartOp(op);
}

GrpcAgentStream::NextOp GrpcAgentStream::TakeNextOpLocked() {
  if (write_in_flight_ || writes_stopped_) return NextOp::kNone;
  if (queue_.empty()) {
    if (!close_requested_) return NextOp::kNone;
    writes_stopped_ = true;  // nothing may follow WritesDone
    write_in_flight_ = true;
    return NextOp::kWritesDone;
  }
  writing_ = std::move(queue_.front());
  queue_.pop_front();
  if (writing_.has_heartbeat()) heartbeat_queued_ = false;
  write_in_flight_ = true;
  return NextOp::kWrite;
}

void GrpcAgentStream::StartOp(NextOp op) {
  if (op == NextOp::kWrite) StartWrite(&writing_);
  if (op == NextOp::kWritesDone) StartWritesDone();
}

bool GrpcAgentStream::TakeHoldReleaseLocked() {
  if (!writes_stopped_ || write_in_flight_ || hold_released_) return false;
  hold_released_ = true;
  return true;
}

namespace {

// As ddp-client reports its running workers.
void AddRunningWorkers(int nproc, v1::Heartbeat* heartbeat) {
  for (int rank = 0; rank < nproc; ++rank) {
    v1::WorkerState* worker = heartbeat->add_workers();
    worker->set_local_rank(rank);
    worker->set_state(v1::WORKER_RUNNING);
    worker->set_pid(100000 + rank);
    worker->set_heartbeat_age_ms(-1);
  }
}

}  // namespace

void GrpcAgentStream::SendHeartbeat(SimDatagrams::Outbox& outbox) {
  using Route = client::SessionCore::HeartbeatRoute;
  v1::AgentMessage message;
  std::optional<heartbeat::Datagram> datagram;
  std::optional<std::string> states_datagram;
  Route route = Route::kStream;
  int port = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!agent_.ShouldHeartbeat() || heartbeat_queued_ || writes_stopped_) {
      if (heartbeat_queued_) counters_.heartbeats_dropped.fetch_add(1);
      return;
    }
    core_.SetGeneration(agent_.Header().generation);
    const absl::Time now = clock_.Now();
    const bool ask = ack_heartbeats_ && core_.AckDue(now);
    if (states_datagram_sequence_ != 0 && core_.StatesTaken(states_datagram_sequence_)) {
      states_sent_for_ = states_datagram_generation_;
      states_datagram_sequence_ = 0;
    }
    // As ddp-client: the workers' states only when they changed (here: once
    // per generation, when they start running), as a states datagram where
    // the coordinator takes them (sent again until one is taken), else on
    // the stream with the lease renewal that heartbeat would ask for as a
    // datagram.
    const bool running = agent_.phase() == SimAgentPhase::kRunning;
    const bool states = running && states_sent_for_ != agent_.Header().generation;
    std::string payload;
    if (states) {
      v1::Heartbeat only_states;
      AddRunningWorkers(agent_.identity().nproc, &only_states);
      payload = only_states.SerializeAsString();
    }
    if (core_.heartbeat_channel() != nullptr) {
      route = core_.RouteHeartbeat(states, now, payload.size());
      port = core_.heartbeat_channel()->udp_port();
    }
    if (route == Route::kStatesDatagram) {
      const heartbeat::DatagramFields fields = core_.StatesDatagram(now);
      states_datagram_sequence_ = fields.sequence;
      states_datagram_generation_ = agent_.Header().generation;
      states_datagram =
          heartbeat::EncodeStatesDatagram(fields, stream_messages_, payload, *DatagramKeyLocked());
    } else if (route != Route::kStream) {
      datagram = heartbeat::EncodeDatagram(core_.HeartbeatDatagram(ask, now), *DatagramKeyLocked());
    }
  }
  if (states_datagram.has_value()) {
    datagrams_->SendNow(shard_, port, *states_datagram);
    counters_.heartbeats_sent.fetch_add(1);
    counters_.heartbeat_datagrams.fetch_add(1);
    return;
  }
  if (datagram.has_value()) {
    outbox.Add(shard_, port, *datagram);
    if (route == Route::kDatagram) {
      counters_.heartbeats_sent.fetch_add(1);
      counters_.heartbeat_datagrams.fetch_add(1);
      return;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (heartbeat_queued_ || writes_stopped_) return;
    heartbeat_queued_ = true;
    const absl::Time now = clock_.Now();
    const bool ask = ack_heartbeats_ && route == Route::kStream && core_.AckDue(now);
    message = core_.HeartbeatMessage(ask, now);
    const bool running = agent_.phase() == SimAgentPhase::kRunning;
    if (running && states_sent_for_ != agent_.Header().generation) {
      states_sent_for_ = agent_.Header().generation;
      states_datagram_sequence_ = 0;  // these are newer than any still unanswered
      AddRunningWorkers(agent_.identity().nproc, message.mutable_heartbeat());
    }
  }
  counters_.heartbeats_sent.fetch_add(1);
  Enqueue(std::move(message));
}

absl::Status GrpcAgentStream::SendWorkerExited(int exit_code) {
  v1::AgentMessage message;
  {
    absl::MutexLock lock(&mu_);
    DDP_ASSIGN_OR_RETURN(NodeHeaderFields header, agent_.WorkerExitHeader());
    v1::WorkerExited* exited = message.mutable_worker_exited();
    *exited->mutable_header() = core_.Header(header.generation);
    exited->set_local_rank(0);
    exited->set_exit_code(exit_code);
    exited->set_error_message("rdzv_sim: simulated worker failure");
    exited->set_time_unix_ms(absl::ToUnixMillis(clock_.Now()));
  }
  Enqueue(std::move(message));
  return absl::OkStatus();
}

void GrpcAgentStream::Cancel() {
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }
  context().TryCancel();
}

void GrpcAgentStream::OnWriteDone(bool ok) {
  NextOp op = NextOp::kNone;
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (!ok) writes_stopped_ = true;  // the stream is ending; the read says why
    op = TakeNextOpLocked();
    release = TakeHoldReleaseLocked();
  }
  StartOp(op);
  if (release) RemoveHold();
}

void GrpcAgentStream::OnWritesDoneDone(bool /*ok*/) {
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    release = TakeHoldReleaseLocked();
  }
  if (release) RemoveHold();
}

void GrpcAgentStream::StopWritesAndMaybeRelease() {
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    writes_stopped_ = true;
    queue_.clear();
    release = TakeHoldReleaseLocked();
  }
  if (release) RemoveHold();
}

void GrpcAgentStream::OnReadDone(bool ok) {
  if (!ok) {
    StopWritesAndMaybeRelease();
    return;
  }
  Handle(incoming_);
  bool finished = false;
  {
    absl::MutexLock lock(&mu_);
    finished = finished_by_coordinator_;
  }
  // After JobFinished keep reading: the coordinator ends the stream once the
  // agent half-closed.
  StartRead(&incoming_);
  if (finished) CloseWrites();
}

void GrpcAgentStream::Handle(const v1::CoordinatorMessage& message) {
  const absl::Time now = clock_.Now();
  absl::Status error;
  std::optional<v1::AgentMessage> reply;
  {
    absl::MutexLock lock(&mu_);
    switch (message.body_case()) {
      case v1::CoordinatorMessage::kRegistered: {
        core_.OnRegistered(message.registered());
        if (const v1::HeartbeatChannel* channel = core_.heartbeat_channel()) {
          if (datagrams_ == nullptr) {
            core_.DropHeartbeatChannel();
          } else {
            datagrams_->Register(channel->session(),
                                 [this](absl::string_view bytes) { OnAckDatagram(bytes); });
          }
        }
        absl::StatusOr<absl::Duration> rtt = agent_.OnRegistered(now);
        if (rtt.ok()) tracker_.RecordRegistered(*rtt);
        error = rtt.status();
        break;
      }
      case v1::CoordinatorMessage::kRequestMasterInfo: {
        absl::StatusOr<MasterInfoReply> info =
            agent_.OnRequestMasterInfo(message.request_master_info().generation());
        if (!info.ok()) {
          error = info.status();
          break;
        }
        v1::MasterInfo* m = reply.emplace().mutable_master_info();
        *m->mutable_header() = core_.Header(info->header.generation);
        m->set_master_port(info->master_port);
        m->set_nccl_unique_id(info->nccl_unique_id);
        break;
      }
      case v1::CoordinatorMessage::kAssignment: {
        const v1::Assignment& a = message.assignment();
        absl::StatusOr<AssignmentEvent> event =
            agent_.OnAssignment(a.generation(), a.group_rank(), now);
        if (event.ok() && !event->duplicate) {
          tracker_.RecordAssignment(event->ordinal, event->generation, now);
        }
        error = event.status();
        break;
      }
      case v1::CoordinatorMessage::kStopWorkers: {
        absl::StatusOr<NodeHeaderFields> header =
            agent_.OnStopWorkers(message.stop_workers().generation());
        if (!header.ok()) {
          error = header.status();
          break;
        }
        *reply.emplace().mutable_workers_stopped()->mutable_header() =
            core_.Header(header->generation);
        break;
      }
      case v1::CoordinatorMessage::kHeartbeatAck:  // a real agent renews its lease here
        core_.Acknowledged(message.heartbeat_ack());
        break;
      case v1::CoordinatorMessage::kJobFinished:
      case v1::CoordinatorMessage::kNodeDismissed:
        agent_.OnFinished();
        finished_by_coordinator_ = true;
        break;
      default:
        error = absl::InvalidArgumentError("the coordinator sent an empty CoordinatorMessage");
    }
  }
  if (!error.ok()) Fail(error);
  if (reply) Enqueue(std::move(*reply));
}

void GrpcAgentStream::OnAckDatagram(absl::string_view bytes) {
  absl::MutexLock lock(&mu_);
  const v1::HeartbeatChannel* channel = core_.heartbeat_channel();
  if (channel == nullptr) return;
  auto ack = heartbeat::DecodeDatagram(bytes, heartbeat::DatagramKind::kAck, *DatagramKeyLocked());
  if (ack.ok() && ack->session == channel->session()) core_.DatagramAnswered(*ack);
}

heartbeat::DatagramKey* GrpcAgentStream::DatagramKeyLocked() {
  const v1::HeartbeatChannel* channel = core_.heartbeat_channel();
  if (channel == nullptr) return nullptr;
  if (!key_.has_value() || key_session_ != channel->session()) {
    key_.emplace(channel->key());
    key_session_ = channel->session();
  }
  return &*key_;
}

void GrpcAgentStream::Fail(const absl::Status& status) {
  std::string node_id;
  {
    absl::MutexLock lock(&mu_);
    node_id = agent_.identity().node_id;
  }
  tracker_.RecordFailure(node_id, status);
}

void GrpcAgentStream::OnDone(const grpc::Status& status) {
  bool expected = false;
  std::string node_id;
  {
    absl::MutexLock lock(&mu_);
    agent_.OnStreamFailed();
    expected = cancelled_ || finished_by_coordinator_;
    node_id = agent_.identity().node_id;
  }
  if (!expected) {
    absl::Status reason = FromGrpcStatus(status);
    if (reason.ok()) {
      reason = absl::UnavailableError("the coordinator closed the stream");
    }
    tracker_.RecordFailure(node_id, reason);
  }
  tracker_.RecordStreamDone();
}

}  // namespace ddp::rdzv_sim
