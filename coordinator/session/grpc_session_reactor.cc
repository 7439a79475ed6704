#include "coordinator/session/grpc_session_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/rpc/call_auth.h"
#include "coordinator/session/job_proto_convert.h"

namespace ddp::session {
namespace {

// Per-stream memory budget for the reused read buffer.
constexpr size_t kMaxRetainedReadBytes = 16 * 1024;

const char* BodyName(const v1::AgentMessage& message) {
  switch (message.body_case()) {
    case v1::AgentMessage::kRegister:
      return "Register";
    case v1::AgentMessage::kHeartbeat:
      return "Heartbeat";
    case v1::AgentMessage::kWorkerExited:
      return "WorkerExited";
    case v1::AgentMessage::kWorkersStopped:
      return "WorkersStopped";
    case v1::AgentMessage::kMasterInfo:
      return "MasterInfo";
    case v1::AgentMessage::kLeave:
      return "Leave";
    case v1::AgentMessage::kStacks:
      return "Stacks";
    case v1::AgentMessage::kPreempted:
      return "Preempted";
    case v1::AgentMessage::kReadyToLeave:
      return "ReadyToLeave";
    default:
      return "an empty message";
  }
}

}  // namespace

absl::Status ReportWorkerStates(RendezvousService& rendezvous, const rendezvous::NodeRef& ref,
                                const v1::Heartbeat& heartbeat) {
  const rendezvous::RendezvousLimits& limits = rendezvous.limits();
  if (heartbeat.workers_size() > limits.max_nproc_per_node) {
    return absl::InvalidArgumentError(absl::StrCat("heartbeat lists ", heartbeat.workers_size(),
                                                   " workers; the limit is ",
                                                   limits.max_nproc_per_node));
  }
  DDP_ASSIGN_OR_RETURN(std::vector<rendezvous::WorkerProgress> progress,
                       ProgressFromProto(heartbeat, limits, rendezvous.Now()));
  if (!progress.empty()) {
    DDP_RETURN_IF_ERROR(rendezvous.ReportProgress(ref, std::move(progress)));
  }
  if (heartbeat.workers_size() > 0) {  // the states changed: the full list
    DDP_ASSIGN_OR_RETURN(std::vector<rendezvous::WorkerActivity> activity,
                         ActivityFromProto(heartbeat, limits, rendezvous.Now()));
    DDP_RETURN_IF_ERROR(rendezvous.ReportActivity(ref, std::move(activity)));
  }
  return absl::OkStatus();
}

SessionReactor::SessionReactor(SessionTransport* transport, RendezvousService& rendezvous,
                               const GrpcSessionServiceOptions& options,
                               std::atomic<int>* open_streams, auth::Identity identity)
    : transport_(transport),
      rendezvous_(rendezvous),
      options_(options),
      identity_(std::move(identity)),
      open_streams_(open_streams),
      sink_(std::make_shared<Sink>(this)) {
  open_streams_->fetch_add(1);
  transport_->StartRead(&incoming_bytes_);
}

// ---- Read side ----

void SessionReactor::OnReadDone(bool ok) {
  {
    absl::MutexLock lock(&sink_->mu);
    if (gate_.finished()) return;
    if (!ok) {  // the agent closed its side, or the stream broke
      FinishLocked(grpc::Status::OK);
      return;
    }
  }
  const size_t size = incoming_bytes_.Length();
  absl::Status status;
  if (!grpc::SerializationTraits<v1::AgentMessage>::Deserialize(&incoming_bytes_, &incoming_)
           .ok()) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "/ddp.v1.SessionService/Session: a message of ", size,
        " bytes from the agent is not a valid ddp.v1.AgentMessage; the session is closed "
        "(is the agent's ddp.v1 protocol the coordinator's?)"));
  } else if (cursor_ != nullptr) {
    // Counted while handled, under the cursor's lock: a states datagram made
    // after this message is taken only once it is (UdpHeartbeatEndpoint).
    absl::MutexLock lock(&cursor_->mu);
    status = Handle(incoming_);
    ++cursor_->handled;
  } else {
    status = Handle(incoming_);
  }
  // A large message (e.g. a long error text) would otherwise keep its buffers
  // for the life of the stream.
  if (incoming_.ByteSizeLong() > kMaxRetainedReadBytes) {
    incoming_ = v1::AgentMessage();
  }
  absl::MutexLock lock(&sink_->mu);
  if (!status.ok()) {
    FinishLocked(ToGrpcStatus(status));
  } else if (left_) {
    // Finished once the departure is durable (see kLeave).
  } else if (!gate_.finished()) {
    transport_->StartRead(&incoming_bytes_);
  }
}

absl::Status SessionReactor::Handle(const v1::AgentMessage& message) {
  if (message.body_case() == v1::AgentMessage::kRegister) {
    return HandleRegister(message.register_());
  }
  if (!registered_) {
    return absl::FailedPreconditionError(
        absl::StrCat("register first: the first message of a session must be "
                     "Register, got ",
                     BodyName(message)));
  }
  const rendezvous::RendezvousLimits& limits = rendezvous_.limits();
  switch (message.body_case()) {
    case v1::AgentMessage::kHeartbeat: {
      const v1::Heartbeat& m = message.heartbeat();
      DDP_ASSIGN_OR_RETURN(rendezvous::NodeRef ref, CheckHeader(m.header()));
      DDP_ASSIGN_OR_RETURN(rendezvous::Generation running, rendezvous_.Heartbeat(ref));
      DDP_RETURN_IF_ERROR(ReportWorkerStates(rendezvous_, ref, m));
      if (m.sequence() != 0) {  // renews the agent's lease
        v1::CoordinatorMessage ack;
        ack.mutable_heartbeat_ack()->set_sequence(m.sequence());
        ack.mutable_heartbeat_ack()->set_running_generation(running);
        absl::MutexLock lock(&sink_->mu);
        EnqueueLocked(std::move(ack));
      }
      return absl::OkStatus();
    }
    case v1::AgentMessage::kWorkerExited: {
      const v1::WorkerExited& m = message.worker_exited();
      DDP_ASSIGN_OR_RETURN(rendezvous::NodeRef ref, CheckHeader(m.header()));
      DDP_ASSIGN_OR_RETURN(rendezvous::WorkerExit exit, WorkerExitFromProto(m, limits));
      return rendezvous_.WorkerExited(ref, exit);
    }
    case v1::AgentMessage::kWorkersStopped: {
      DDP_ASSIGN_OR_RETURN(rendezvous::NodeRef ref,
                           CheckHeader(message.workers_stopped().header()));
      return rendezvous_.WorkersStopped(ref);
    }
    case v1::AgentMessage::kMasterInfo: {
      const v1::MasterInfo& m = message.master_info();
      DDP_ASSIGN_OR_RETURN(rendezvous::NodeRef ref, CheckHeader(m.header()));
      DDP_ASSIGN_OR_RETURN(rendezvous::MasterInfo info, MasterInfoFromProto(m, limits));
      return rendezvous_.ReportMasterInfo(ref, info);
    }
    case v1::AgentMessage::kLeave: {
      const v1::Leave& m = message.leave();
      DDP_ASSIGN_OR_RETURN(rendezvous::NodeRef ref, CheckHeader(m.header()));
      if (options_.fleet != nullptr && m.health_checks_size() > 0) {
        // Checks between generations: stored with the node before it leaves.
        DDP_RETURN_IF_ERROR(
            options_.fleet->ReportChecks(node_id_, job_id_, m.header().generation(),
                                         {m.health_checks().begin(), m.health_checks().end()}));
      }
      absl::Status status = rendezvous_.LeaveSession(ref, sink_);
      if (!status.ok()) {
        DDP_LOG(INFO) << "node " << node_id_ << " left job " << job_id_ << ": "
                      << rendezvous::Capped(m.reason());
        return status;
      }
      left_ = true;  // the stream ends once the departure is durable
      return absl::OkStatus();
    }
    case v1::AgentMessage::kStacks: {
      const v1::Stacks& m = message.stacks();
      if (m.workers_size() > limits.max_nproc_per_node) {
        return absl::InvalidArgumentError(absl::StrCat("Stacks lists ", m.workers_size(),
                                                       " workers; the limit is ",
                                                       limits.max_nproc_per_node));
      }
      DDP_ASSIGN_OR_RETURN(rendezvous::NodeRef ref, CheckHeader(m.header()));
      if (options_.stack_collector != nullptr) {
        options_.stack_collector->OnStacks(ref.job_id, ref.node_id, ref.incarnation, m);
      }
      return absl::OkStatus();
    }
    case v1::AgentMessage::kPreempted: {
      const v1::Preempted& m = message.preempted();
      DDP_ASSIGN_OR_RETURN(rendezvous::NodeRef ref, CheckHeader(m.header()));
      DDP_ASSIGN_OR_RETURN(absl::Time leaves_at,
                           LeaveAtFromProto(m.leave_at_unix_ms(), limits, rendezvous_.Now()));
      return rendezvous_.Preempted(ref, leaves_at, m.reason());  // the core caps it
    }
    case v1::AgentMessage::kReadyToLeave: {
      DDP_ASSIGN_OR_RETURN(rendezvous::NodeRef ref, CheckHeader(message.ready_to_leave().header()));
      return rendezvous_.ReadyToLeave(ref);
    }
    default:
      return absl::InvalidArgumentError(
          "empty AgentMessage: set one of register, heartbeat, "
          "worker_exited, workers_stopped, master_info, leave, stacks, preempted, "
          "ready_to_leave");
  }
}

absl::Status SessionReactor::HandleRegister(const v1::Register& message) {
  if (registered_) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", node_id_,
                     "' already registered on this stream; open a new "
                     "stream to register again"));
  }
  DDP_ASSIGN_OR_RETURN(rendezvous::RegisterRequest request,
                       RegisterFromProto(message, rendezvous_.limits()));
  if (options_.authorizer != nullptr && options_.authorizer->enabled()) {
    DDP_RETURN_IF_ERROR(options_.authorizer->Authorize(identity_, "/ddp.v1.SessionService/Session",
                                                       request.job_id));
  }
  if (options_.fleet != nullptr) {
    DDP_RETURN_IF_ERROR(
        options_.fleet->Admit(request.node_id, request.address, request.job_id,
                              {message.health_checks().begin(), message.health_checks().end()},
                              /*resuming=*/request.generation > 0));
  }
  std::optional<HeartbeatChannelGrant> channel;
  std::shared_ptr<StreamCursor> cursor;
  if (options_.heartbeat_endpoint != nullptr) {
    cursor = std::make_shared<StreamCursor>();
    channel = options_.heartbeat_endpoint->Open(
        rendezvous::NodeRef{request.job_id, request.node_id, request.incarnation, 0}, cursor);
  }
  if (channel.has_value()) {
    absl::MutexLock lock(&sink_->mu);
    sink_->heartbeat_channel = channel;
  }
  // The Registered reply is the first message the core queues for this
  // session: it leaves once the registration is durable.
  if (absl::Status opened = rendezvous_.OpenSession(request, sink_).status(); !opened.ok()) {
    if (channel.has_value()) options_.heartbeat_endpoint->Close(channel->session);
    return opened;
  }
  if (channel.has_value()) {
    heartbeat_session_ = channel->session;
    if (channel->worker_states) cursor_ = std::move(cursor);
  }
  registered_ = true;
  job_id_ = request.job_id;
  node_id_ = request.node_id;
  incarnation_ = request.incarnation;
  return absl::OkStatus();
}

absl::StatusOr<rendezvous::NodeRef> SessionReactor::CheckHeader(
    const v1::NodeHeader& header) const {
  DDP_ASSIGN_OR_RETURN(rendezvous::NodeRef ref, NodeRefFromProto(header, rendezvous_.limits()));
  if (ref.job_id != job_id_ || ref.node_id != node_id_ || ref.incarnation != incarnation_) {
    return absl::InvalidArgumentError(
        absl::StrCat("header names job '", rendezvous::Capped(ref.job_id), "' node '",
                     rendezvous::Capped(ref.node_id), "' incarnation ", ref.incarnation,
                     " but this stream registered job '", job_id_, "' node '", node_id_,
                     "' incarnation ", incarnation_));
  }
  return ref;
}

// ---- Write side ----

void SessionReactor::Sink::Deliver(const rendezvous::OutboundMessage& message) {
  absl::MutexLock lock(&mu);
  if (reactor_ == nullptr) return;
  v1::CoordinatorMessage proto;
  OutboundToProto(message.body, &proto);
  if (proto.has_registered() && heartbeat_channel.has_value()) {
    v1::HeartbeatChannel* channel = proto.mutable_registered()->mutable_heartbeat_channel();
    channel->set_udp_port(heartbeat_channel->port);
    channel->set_session(heartbeat_channel->session);
    channel->set_key(heartbeat_channel->key);
    channel->set_worker_states(heartbeat_channel->worker_states);
  }
  reactor_->EnqueueLocked(std::move(proto));
}

void SessionReactor::Sink::Close(const absl::Status& status) {
  absl::MutexLock lock(&mu);
  if (reactor_ != nullptr) reactor_->FinishLocked(ToGrpcStatus(status));
}

void SessionReactor::EnqueueLocked(v1::CoordinatorMessage message) {
  if (gate_.finished()) return;
  if (static_cast<int>(queue_.size()) >= options_.max_queued_messages) {
    FinishLocked(ToGrpcStatus(absl::ResourceExhaustedError(
        absl::StrCat("the agent is not reading: ", queue_.size(),
                     " coordinator messages are queued, the limit; the stream is closed, "
                     "register again to resume"))));
    return;
  }
  queue_.push_back(std::move(message));
  PumpLocked();
}

void SessionReactor::PumpLocked() {
  if (gate_.busy() || queue_.empty()) return;
  bool own_buffer = false;
  outgoing_.Clear();  // the serializer wants an empty buffer
  const grpc::Status serialized = grpc::SerializationTraits<v1::CoordinatorMessage>::Serialize(
      queue_.front(), &outgoing_, &own_buffer);
  queue_.pop_front();
  if (!serialized.ok()) {
    FinishLocked(
        grpc::Status(grpc::StatusCode::INTERNAL,
                     "cannot serialize a message to the agent: " + serialized.error_message()));
    return;
  }
  gate_.Write(transport_, &outgoing_);
}

void SessionReactor::FinishLocked(const grpc::Status& status) {
  if (gate_.finished()) return;
  queue_.clear();
  gate_.Finish(transport_, status);
}

void SessionReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&sink_->mu);
  if (gate_.WriteDone(transport_, ok, "session stream broken while writing")) PumpLocked();
}

void SessionReactor::OnCancel() {
  absl::MutexLock lock(&sink_->mu);
  FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "session cancelled by the agent"));
}

void SessionReactor::OnDone() {
  {
    absl::MutexLock lock(&sink_->mu);
    sink_->reactor_ = nullptr;
  }
  // Before the core hears of the end: no heartbeat datagram may mark the node
  // connected again after it.
  if (heartbeat_session_ != 0) options_.heartbeat_endpoint->Close(heartbeat_session_);
  if (registered_) {
    rendezvous_.SessionEnded(rendezvous::NodeRef{job_id_, node_id_, incarnation_, 0}, sink_.get(),
                             left_);
  }
  open_streams_->fetch_sub(1);
}

// ---- Service ----

namespace {

// The callback API's reactor as the session's transport.
class CallbackSessionStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public SessionTransport {
 public:
  CallbackSessionStream(RendezvousService& rendezvous, const GrpcSessionServiceOptions& options,
                        std::atomic<int>* open_streams, auth::Identity identity)
      : session_(this, rendezvous, options, open_streams, std::move(identity)) {}

  void StartRead(grpc::ByteBuffer* buffer) override {
    grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>::StartRead(buffer);
  }
  void StartWrite(const grpc::ByteBuffer* buffer) override {
    grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>::StartWrite(buffer);
  }
  void Finish(const grpc::Status& status) override {
    grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>::Finish(status);
  }

  void OnReadDone(bool ok) override { session_.OnReadDone(ok); }
  void OnWriteDone(bool ok) override { session_.OnWriteDone(ok); }
  void OnCancel() override { session_.OnCancel(); }
  void OnDone() override {
    session_.OnDone();
    delete this;
  }

 private:
  SessionReactor session_;
};

}  // namespace

GrpcSessionService::GrpcSessionService(RendezvousService& rendezvous,
                                       GrpcSessionServiceOptions options)
    : rendezvous_(rendezvous), options_(options) {}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* GrpcSessionService::Session(
    grpc::CallbackServerContext* context) {
  return new CallbackSessionStream(rendezvous_, options_, &open_streams_,
                                   rpc::CallIdentity(options_.authorizer, *context));
}

}  // namespace ddp::session
