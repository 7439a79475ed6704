#include "client/agent/grpc_session_client.h"

#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/grpc_status.h"
#include "common/grpc_tls.h"
#include "common/logging.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ddp::client {
namespace {

// Codes that a retry cannot fix: the coordinator refused this registration
// (bad or contradicting flags, unknown job, full job, finished job, excluded
// node, no SessionService at that address).
bool IsPermanent(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

constexpr size_t kMaxUnacknowledged = 256;

gpr_timespec ToGprDeadline(absl::Duration from_now) {
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                      gpr_time_from_millis(absl::ToInt64Milliseconds(from_now), GPR_TIMESPAN));
}

const char* ChannelStateName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "idle";
    case GRPC_CHANNEL_CONNECTING:
      return "connecting";
    case GRPC_CHANNEL_READY:
      return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "connection failing";
    case GRPC_CHANNEL_SHUTDOWN:
      return "shut down";
  }
  return "unknown";
}

}  // namespace

uint64_t GrpcSessionClient::NewIncarnation() {
  std::random_device device;
  std::mt19937_64 engine((static_cast<uint64_t>(device()) << 32) ^ device());
  uint64_t value = 0;
  while (value == 0) value = engine();
  return value;
}

GrpcSessionClient::GrpcSessionClient(SessionClientOptions options, SessionEvents* events,
                                     uint64_t incarnation)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : MonotonicClock::Get()),
      events_(events),
      incarnation_(incarnation == 0 ? NewIncarnation() : incarnation),
      heartbeat_interval_(options_.default_heartbeat_interval) {
  grpc::ChannelArguments args;
  // gRPC's own reconnect backoff (1 s growing to 120 s by default) would make
  // a resume miss the heartbeat timeout; our Backoff paces the attempts.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  channel_ = CoordinatorChannel(options_.target, options_.tls, options_.token, args);
  stub_ = v1::SessionService::NewStub(channel_);
}

GrpcSessionClient::~GrpcSessionClient() { Close(); }

void GrpcSessionClient::Start() {
  {
    absl::MutexLock lock(&mu_);
    DDP_CHECK(!started_) << "GrpcSessionClient::Start called twice";
    started_ = true;
  }
  reader_ = std::thread([this] { ReaderLoop(); });
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
}

void GrpcSessionClient::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return;
    closing_ = true;
  }
  {
    absl::MutexLock lock(&write_mu_);
    half_closed_ = true;  // no Write may follow WritesDone
    if (stream_ != nullptr) stream_->WritesDone();
  }
  if (reader_.joinable()) {
    // The coordinator ends the stream after our half-close; cancel otherwise.
    absl::MutexLock lock(&mu_);
    auto stream_gone = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return context_ == nullptr; };
    mu_.AwaitWithTimeout(absl::Condition(&stream_gone), options_.close_grace);
    if (context_ != nullptr) context_->TryCancel();
  }
  if (reader_.joinable()) reader_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
}

bool GrpcSessionClient::closing() const {
  absl::MutexLock lock(&mu_);
  return closing_;
}

uint64_t GrpcSessionClient::incarnation() const {
  absl::MutexLock lock(&mu_);
  return incarnation_;
}

int GrpcSessionClient::registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

void GrpcSessionClient::SetGeneration(int64_t generation) {
  absl::MutexLock lock(&mu_);
  generation_ = generation;
  lease_expired_ = false;
}

void GrpcSessionClient::LeaseExpired() {
  absl::MutexLock lock(&mu_);
  lease_expired_ = true;
  // The coordinator may not know yet (a slow coordinator rather than a cut):
  // a resume tells it now.
  if (context_ != nullptr) context_->TryCancel();
}

void GrpcSessionClient::HandleAck(const v1::HeartbeatAck& ack) {
  std::optional<absl::Time> sent_at;
  {
    absl::MutexLock lock(&mu_);
    while (!unacknowledged_.empty() && unacknowledged_.front().first <= ack.sequence()) {
      if (unacknowledged_.front().first == ack.sequence()) {
        sent_at = unacknowledged_.front().second;
      }
      unacknowledged_.pop_front();
    }
  }
  if (sent_at) events_->OnLeaseRenewed(*sent_at, ack.running_generation());
}

void GrpcSessionClient::Send(v1::AgentMessage message) {
  if (v1::NodeHeader* header = MutableHeader(&message)) {
    absl::MutexLock lock(&mu_);
    header->set_job_id(options_.registration.job_id());
    header->set_node_id(options_.registration.node_id());
    header->set_incarnation(incarnation_);
  }
  absl::MutexLock lock(&write_mu_);
  if (stream_ == nullptr || half_closed_) {
    DDP_LOG(DEBUG) << "session down; dropped " << message.ShortDebugString();
    return;
  }
  // A failed write means the stream broke; the reader sees it and resumes.
  if (!stream_->Write(message)) {
    DDP_LOG(DEBUG) << "session write failed; the reader will resume";
  }
}

bool GrpcSessionClient::SleepUnlessClosing(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&closing_), delay);
  return !closing_;
}

absl::Status GrpcSessionClient::ConnectAndRegister(absl::Time deadline,
                                                   v1::Registered* registered) {
  // Wait for the connection in slices so Close() is never held up for long.
  const absl::Time give_up = std::min(deadline, clock_.Now() + options_.attempt_timeout);
  bool connected = false;
  while (!connected && clock_.Now() < give_up) {
    if (closing()) return absl::CancelledError("closing");
    connected = channel_->WaitForConnected(
        ToGprDeadline(std::min(absl::Milliseconds(200), give_up - clock_.Now())));
  }
  if (!connected) {
    return absl::UnavailableError(absl::StrCat(
        "cannot connect to the coordinator at ", options_.target, " (channel ",
        ChannelStateName(channel_->GetState(false)), "): is it running and reachable?"));
  }
  auto context = std::make_unique<grpc::ClientContext>();
  v1::AgentMessage hello;
  v1::Register* reg = hello.mutable_register_();
  *reg = options_.registration;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return absl::CancelledError("closing");
    reg->set_incarnation(incarnation_);
    reg->set_generation(generation_);
    reg->set_lease_expired(lease_expired_);
    unacknowledged_.clear();  // acks of the old stream never come
    context_ = context.get();
    // The heartbeat thread cancels the attempt if Registered is late.
    register_deadline_ = clock_.Now() + options_.attempt_timeout;
  }
  const absl::Time register_sent_at = clock_.Now();
  std::unique_ptr<Stream> stream = stub_->Session(context.get());
  v1::CoordinatorMessage first;
  absl::Status status;
  const bool answered = stream->Write(hello) && stream->Read(&first);
  {
    absl::MutexLock lock(&mu_);
    register_deadline_ = absl::InfiniteFuture();
  }
  if (!answered) {
    status = FromGrpcStatus(stream->Finish());
    if (status.ok()) {
      status = absl::UnavailableError(
          "the coordinator ended the session "
          "without answering Register");
    }
  } else if (!first.has_registered()) {
    context->TryCancel();
    stream->Finish();
    status = absl::InternalError(absl::StrCat("the coordinator answered Register with ",
                                              first.ShortDebugString().substr(0, 200),
                                              " instead of Registered"));
  }
  if (!status.ok()) {
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
    return status;
  }
  *registered = first.registered();
  events_->OnLeaseGranted(absl::Milliseconds(registered->lease_ms()),
                          absl::Milliseconds(registered->lease_kill_ms()));
  const bool running = registered->state() == v1::RUNNING && registered->role() == v1::MEMBER;
  events_->OnLeaseRenewed(register_sent_at, running ? registered->generation() : 0);
  {
    absl::MutexLock lock(&mu_);
    ++registrations_;
    if (registered->settings().heartbeat_interval_ms() > 0) {
      heartbeat_interval_ = absl::Milliseconds(registered->settings().heartbeat_interval_ms());
    }
  }
  {
    absl::MutexLock lock(&write_mu_);
    if (half_closed_) stream->WritesDone();  // Close() came meanwhile
    stream_ = stream.release();
  }
  {
    absl::MutexLock lock(&mu_);
    heartbeat_now_ = true;
  }
  context.release();  // owned through context_ until ReadUntilEnd
  return absl::OkStatus();
}

absl::Status GrpcSessionClient::ReadUntilEnd() {
  Stream* stream = nullptr;
  {
    absl::MutexLock lock(&write_mu_);
    stream = stream_;
  }
  v1::CoordinatorMessage message;
  while (stream->Read(&message)) {
    if (message.has_heartbeat_ack()) {
      HandleAck(message.heartbeat_ack());
    } else {
      events_->OnCoordinatorMessage(message);
    }
  }
  {
    absl::MutexLock lock(&write_mu_);
    stream_ = nullptr;  // no writer can reach it any more
  }
  absl::Status status = FromGrpcStatus(stream->Finish());
  delete stream;
  absl::MutexLock lock(&mu_);
  delete context_;
  context_ = nullptr;
  return status;
}

void GrpcSessionClient::ReaderLoop() {
  Backoff backoff(options_.backoff);
  bool registered_once = false;  // with the current incarnation
  absl::Time lost_at = clock_.Now();
  absl::Status last_error;
  while (!closing()) {
    v1::Registered registered;
    const absl::Duration window =
        registered_once ? options_.resume_timeout : options_.connect_timeout;
    absl::Status status = ConnectAndRegister(lost_at + window, &registered);
    if (status.ok()) {
      const absl::Time registered_at = clock_.Now();
      DDP_LOG(INFO) << (registered_once ? "session resumed" : "registered")
                    << " with the coordinator at " << options_.target << " (incarnation "
                    << incarnation() << "): " << registered.ShortDebugString();
      events_->OnRegistered(registered, registered_once);
      registered_once = true;
      status = ReadUntilEnd();
      if (closing()) break;
      lost_at = clock_.Now();
      // Any other code ending a live stream (a refused message, a broken
      // connection, a coordinator shutting down) is answered by resuming; a
      // refusal that still holds shows up as the answer to that Register.
      if (status.code() != absl::StatusCode::kAborted) {
        // A stream that keeps ending soon after registering (a message the
        // coordinator refuses again and again) must not spin: back off.
        absl::Duration delay = absl::ZeroDuration();
        if (lost_at - registered_at >= options_.stable_stream) {
          backoff.Reset();
        } else {
          delay = backoff.NextDelay();
        }
        DDP_LOG(WARNING) << "session stream ended (" << status << "); resuming with incarnation "
                         << incarnation() << " in " << delay;
        if (!SleepUnlessClosing(delay)) break;
        continue;
      }
    }
    if (status.code() == absl::StatusCode::kAborted) {
      DDP_LOG(WARNING) << "the coordinator fenced incarnation " << incarnation() << ": " << status
                       << "; stopping the workers and registering again";
      events_->OnFenced(status);
      const uint64_t fresh = NewIncarnation();
      {
        absl::MutexLock lock(&mu_);
        incarnation_ = fresh;
        generation_ = 0;
      }
      registered_once = false;
      lost_at = clock_.Now();
      backoff.Reset();
      continue;
    }
    if (status.ok() || status.code() == absl::StatusCode::kCancelled) {
      status = absl::UnavailableError(
          absl::StrCat("the coordinator ended the session (", status.ToString(), ")"));
    }
    if (status.code() == absl::StatusCode::kUnimplemented) {
      status = absl::UnimplementedError(
          absl::StrCat("the server at ", options_.target,
                       " does not serve ddp.v1.SessionService: is it a ddp coordinator of "
                       "this version? (",
                       status.message(), ")"));
    }
    if (IsPermanent(status.code())) {
      DDP_LOG(ERROR) << "the coordinator at " << options_.target << " refused node '"
                     << options_.registration.node_id() << "': " << status;
      events_->OnSessionFailed(status);
      return;
    }
    last_error = status;
    const absl::Duration limit =
        registered_once ? options_.resume_timeout : options_.connect_timeout;
    const absl::Duration delay = backoff.NextDelay();
    if (clock_.Now() + delay - lost_at > limit) {
      events_->OnSessionFailed(absl::UnavailableError(
          absl::StrCat("coordinator at ", options_.target, " unreachable for ",
                       absl::FormatDuration(limit), " (", registered_once ? "resume" : "connect",
                       " timeout); last error: ", last_error.ToString())));
      return;
    }
    DDP_LOG(INFO) << "session with " << options_.target << " not up (" << status
                  << "); retrying in " << delay;
    if (!SleepUnlessClosing(delay)) break;
  }
}

void GrpcSessionClient::HeartbeatLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closing_ || heartbeat_now_; };
      mu_.AwaitWithTimeout(absl::Condition(&wake), heartbeat_interval_);
      if (closing_) return;
      heartbeat_now_ = false;
      if (context_ != nullptr && clock_.Now() > register_deadline_) {
        DDP_LOG(WARNING) << "no Registered from " << options_.target << " within "
                         << absl::FormatDuration(options_.attempt_timeout)
                         << "; cancelling the attempt";
        register_deadline_ = absl::InfiniteFuture();
        context_->TryCancel();
      }
    }
    bool live = false;
    {
      absl::MutexLock lock(&write_mu_);
      live = stream_ != nullptr;
    }
    if (!live) continue;
    v1::AgentMessage message;
    v1::Heartbeat* heartbeat = message.mutable_heartbeat();
    for (v1::WorkerState& state : events_->WorkerStates()) {
      *heartbeat->add_workers() = std::move(state);
    }
    {
      absl::MutexLock lock(&mu_);
      heartbeat->mutable_header()->set_generation(generation_);
      heartbeat->set_sequence(next_sequence_++);
      // A coordinator that does not acknowledge (an older release) must not
      // make this grow.
      if (unacknowledged_.size() >= kMaxUnacknowledged) unacknowledged_.pop_front();
      // The lease counts on CLOCK_MONOTONIC whatever clock_ is (worker_lease.h).
      unacknowledged_.emplace_back(heartbeat->sequence(), MonotonicClock::Get().Now());
    }
    Send(std::move(message));
  }
}

}  // namespace ddp::client
