#include "client/agent/grpc_session_client.h"

#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/grpc_status.h"
#include "common/grpc_tls.h"
#include "common/logging.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ddp::client {
namespace {

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

SessionCoreOptions CoreOptions(const SessionClientOptions& options) {
  SessionCoreOptions core;
  core.target = options.target;
  core.registration = options.registration;
  core.connect_timeout = options.connect_timeout;
  core.resume_timeout = options.resume_timeout;
  core.default_heartbeat_interval = options.default_heartbeat_interval;
  core.backoff = options.backoff;
  core.stable_stream = options.stable_stream;
  core.waiting_notice_interval = options.waiting_notice_interval;
  return core;
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
      core_(CoreOptions(options_), incarnation == 0 ? NewIncarnation() : incarnation, clock_),
      endpoints_(absl::StrSplit(options_.target, ',', absl::SkipEmpty())) {}

std::shared_ptr<grpc::Channel> GrpcSessionClient::ChannelTo(const std::string& endpoint) {
  std::shared_ptr<grpc::Channel>& channel = channels_[endpoint];
  if (channel == nullptr) {
    grpc::ChannelArguments args;
    // gRPC's own reconnect backoff (1 s growing to 120 s by default) would
    // make a resume miss the heartbeat timeout; our Backoff paces attempts.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
    // HTTP/2 pings (see SessionClientOptions::keepalive_time).
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options_.keepalive_time)));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options_.keepalive_timeout)));
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    channel = CoordinatorChannel(endpoint, options_.tls, options_.token, args);
  }
  return channel;
}

std::string GrpcSessionClient::current_target() const {
  absl::MutexLock lock(&mu_);
  return endpoints_.current();
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
  datagrams_ = std::thread([this] { DatagramLoop(); });
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
  if (datagrams_.joinable()) datagrams_.join();
}

bool GrpcSessionClient::closing() const {
  absl::MutexLock lock(&mu_);
  return closing_;
}

uint64_t GrpcSessionClient::incarnation() const {
  absl::MutexLock lock(&mu_);
  return core_.incarnation();
}

int GrpcSessionClient::registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

void GrpcSessionClient::SetGeneration(int64_t generation) {
  absl::MutexLock lock(&mu_);
  core_.SetGeneration(generation);
}

void GrpcSessionClient::LeaseExpired() {
  absl::MutexLock lock(&mu_);
  core_.SetWorkersFrozen();
  // The stream is silent: its coordinator stalled, was replaced, or is cut
  // off. A new attempt (the next coordinator of the list when there are
  // several) finds one that answers.
  if (context_ != nullptr) context_->TryCancel();
}

void GrpcSessionClient::HandleAck(const v1::HeartbeatAck& ack) {
  std::optional<absl::Time> sent_at;
  {
    absl::MutexLock lock(&mu_);
    sent_at = core_.Acknowledged(ack);
  }
  if (sent_at) events_->OnLeaseRenewed(*sent_at, ack.running_generation());
}

void GrpcSessionClient::Send(v1::AgentMessage message) {
  {
    absl::MutexLock lock(&mu_);
    core_.StampHeader(&message);
  }
  absl::MutexLock lock(&write_mu_);
  if (stream_ == nullptr || half_closed_) {
    DDP_LOG(DEBUG) << "session down; dropped " << message.ShortDebugString();
    return;
  }
  stream_written_.fetch_add(1);
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
  const std::string target = current_target();
  const bool alternatives = options_.target.find(',') != std::string::npos;
  std::shared_ptr<grpc::Channel> channel = ChannelTo(target);
  leader_hint_.clear();
  // Wait for the connection in slices so Close() is never held up for long.
  // With other coordinators to try, one whose connection fails is left at
  // once (it is down: a failover).
  const absl::Time give_up = std::min(deadline, clock_.Now() + options_.attempt_timeout);
  bool connected = false;
  while (!connected && clock_.Now() < give_up) {
    if (closing()) return absl::CancelledError("closing");
    connected = channel->WaitForConnected(ToGprDeadline(
        std::min(absl::Milliseconds(alternatives ? 50 : 200), give_up - clock_.Now())));
    if (!connected && channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      if (alternatives) break;
      NoticeWaiting(absl::StrCat("cannot connect to ", target, " (connection failing)"));
    }
  }
  if (!connected) {
    return absl::UnavailableError(absl::StrCat(
        "cannot connect to the coordinator at ", target, " (channel ",
        ChannelStateName(channel->GetState(false)), "): is it running and reachable?"));
  }
  std::unique_ptr<v1::SessionService::Stub> stub = v1::SessionService::NewStub(channel);
  auto context = std::make_unique<grpc::ClientContext>();
  v1::AgentMessage hello;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return absl::CancelledError("closing");
    hello = core_.RegisterMessage();
    context_ = context.get();
    // The heartbeat thread cancels the attempt if Registered is late. With
    // other coordinators to try, sooner: a leader that stalled (paused)
    // accepts connections but answers nothing.
    register_deadline_ = clock_.Now() + (alternatives ? std::min(options_.attempt_timeout,
                                                                 options_.failover_attempt_timeout)
                                                      : options_.attempt_timeout);
  }
  const absl::Time register_sent_at = clock_.Now();
  std::unique_ptr<Stream> stream = stub->Session(context.get());
  v1::CoordinatorMessage first;
  absl::Status status;
  const bool answered = stream->Write(hello) && stream->Read(&first);
  {
    absl::MutexLock lock(&mu_);
    register_deadline_ = absl::InfiniteFuture();
  }
  if (!answered) {
    status = FromGrpcStatus(stream->Finish());
    leader_hint_ = LeaderHint(*context);
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
  events_->OnLeaseGranted(absl::Milliseconds(registered->lease_ms()));
  const bool running = registered->state() == v1::RUNNING && registered->role() == v1::MEMBER;
  events_->OnLeaseRenewed(register_sent_at, running ? registered->generation() : 0);
  {
    absl::MutexLock lock(&mu_);
    ++registrations_;
  }
  {
    absl::MutexLock lock(&write_mu_);
    if (half_closed_) stream->WritesDone();  // Close() came meanwhile
    stream_written_.store(0);
    stream_ = stream.release();
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
  leader_hint_ = LeaderHint(*context_);
  delete context_;
  context_ = nullptr;
  return status;
}

void GrpcSessionClient::ReaderLoop() {
  while (!closing()) {
    v1::Registered registered;
    absl::Time deadline;
    {
      absl::MutexLock lock(&mu_);
      deadline = core_.AttemptDeadline();
    }
    absl::Status status = ConnectAndRegister(deadline, &registered);
    const bool was_live = status.ok();
    SessionStep step;
    if (was_live) {
      bool resumed = false;
      {
        absl::MutexLock lock(&mu_);
        resumed = core_.OnRegistered(registered);
      }
      OpenHeartbeatChannel();
      {
        // The first heartbeat (with the workers' states) at once, now that
        // its lease renewal can go as a datagram.
        absl::MutexLock lock(&mu_);
        heartbeat_now_ = true;
      }
      v1::Registered logged = registered;
      if (logged.has_heartbeat_channel()) logged.mutable_heartbeat_channel()->clear_key();
      std::optional<std::string> reached;
      {
        absl::MutexLock lock(&mu_);
        reached = core_.ReachedNotice();
      }
      if (reached) DDP_LOG(WARNING) << *reached;
      DDP_LOG(INFO) << (resumed ? "session resumed" : "registered") << " with the coordinator at "
                    << current_target() << " (incarnation " << incarnation()
                    << "): " << logged.ShortDebugString();
      events_->OnRegistered(registered, resumed);
      status = ReadUntilEnd();
      CloseHeartbeatChannel();
      if (closing()) break;
      absl::MutexLock lock(&mu_);
      step = core_.OnStreamEnded(status);
    } else {
      absl::MutexLock lock(&mu_);
      step = core_.OnAttemptFailed(status);
    }
    bool redirected = false;
    if (step.kind == SessionStep::Kind::kRetry) {
      absl::MutexLock lock(&mu_);
      const std::string from = endpoints_.current();
      redirected = endpoints_.Next(leader_hint_);
      if (from != endpoints_.current()) {
        DDP_LOG(INFO) << "coordinator " << from << " "
                      << (redirected ? "is a standby; the leader is " : "failed; trying ")
                      << endpoints_.current();
      }
      // A standby named the leader: go now, once (a stale name is not
      // followed in a loop: the next failure waits its backoff).
      if (redirected && !redirected_last_) step.delay = absl::ZeroDuration();
      redirected_last_ = redirected;
    }
    switch (step.kind) {
      case SessionStep::Kind::kFenced: {
        DDP_LOG(WARNING) << "the coordinator fenced incarnation " << incarnation() << ": "
                         << step.status << "; stopping the workers and registering again";
        events_->OnFenced(step.status);
        const uint64_t fresh = NewIncarnation();
        absl::MutexLock lock(&mu_);
        core_.Refenced(fresh);
        continue;
      }
      case SessionStep::Kind::kGiveUp:
        DDP_LOG(ERROR) << "session of node '" << options_.registration.node_id()
                       << "' with the coordinator at " << current_target()
                       << " ends: " << step.status;
        events_->OnSessionFailed(step.status);
        return;
      case SessionStep::Kind::kRetry:
        if (was_live) {
          DDP_LOG(WARNING) << "session stream ended (" << step.status
                           << "); resuming with incarnation " << incarnation() << " in "
                           << step.delay;
        } else {
          DDP_LOG(DEBUG) << "session with " << current_target() << " not up (" << step.status
                         << "); retrying in " << step.delay;
          NoticeWaiting(std::string(step.status.message()));
        }
        if (!SleepUnlessClosing(step.delay)) return;
        continue;
    }
  }
}

void GrpcSessionClient::NoticeWaiting(const std::string& why) {
  std::optional<std::string> notice;
  {
    absl::MutexLock lock(&mu_);
    notice = core_.WaitingNotice(why);
  }
  if (notice) DDP_LOG(WARNING) << *notice;
}

void GrpcSessionClient::HeartbeatLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closing_ || heartbeat_now_; };
      mu_.AwaitWithTimeout(absl::Condition(&wake), core_.heartbeat_interval());
      if (closing_) return;
      heartbeat_now_ = false;
      if (context_ != nullptr && clock_.Now() > register_deadline_) {
        DDP_LOG(WARNING) << "no Registered from " << endpoints_.current() << " within "
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
    std::vector<v1::WorkerState> workers = events_->WorkerStates();
    int registration = 0;
    int64_t generation = 0;
    {
      absl::MutexLock lock(&mu_);
      registration = registrations_;
      generation = core_.generation();
    }
    // States sent as a states datagram were sent once the coordinator took
    // them; until then every heartbeat carries them again.
    if (datagram_states_.has_value()) {
      bool taken = false;
      {
        absl::MutexLock lock(&mu_);
        taken = core_.StatesTaken(datagram_states_->sequence);
      }
      if (taken && datagram_states_->registration == registration) {
        last_worker_states_ = std::move(datagram_states_->states);
        worker_states_registration_ = datagram_states_->registration;
        worker_states_generation_ = datagram_states_->generation;
      }
      if (taken || datagram_states_->registration != registration) datagram_states_.reset();
    }
    // The workers' states only when they changed since the last heartbeat on
    // this stream, or the generation did (the coordinator keeps them per
    // generation; in-process survivors keep theirs across it): a heartbeat
    // that carries nothing costs the coordinator least, and can go as a
    // datagram. One that carries them goes as a states datagram where the
    // coordinator takes them.
    // Serialized once: what is compared, and a states datagram's payload.
    v1::Heartbeat only_states;
    for (v1::WorkerState& state : workers) *only_states.add_workers() = std::move(state);
    std::string states = only_states.SerializeAsString();
    const bool carries_states = states != last_worker_states_ ||
                                registration != worker_states_registration_ ||
                                generation != worker_states_generation_;
    uint64_t states_sequence = 0;
    const SessionCore::HeartbeatRoute route =
        SendHeartbeatDatagram(carries_states, states, &states_sequence);
    if (route == SessionCore::HeartbeatRoute::kStatesDatagram) {
      datagram_states_ = DatagramStates{states_sequence, std::move(states), registration, generation};
      continue;
    }
    if (route == SessionCore::HeartbeatRoute::kDatagram) continue;
    v1::AgentMessage message;
    {
      absl::MutexLock lock(&mu_);
      // The send time renews the lease: on the lease's clock (Options::clock).
      const absl::Time now = clock_.Now();
      const bool ask = route == SessionCore::HeartbeatRoute::kStream && core_.AckDue(now);
      message = core_.HeartbeatMessage(ask, now);
    }
    if (carries_states) {
      worker_states_registration_ = registration;
      worker_states_generation_ = generation;
      message.mutable_heartbeat()->mutable_workers()->Swap(only_states.mutable_workers());
      last_worker_states_ = std::move(states);
      datagram_states_.reset();  // these are newer than any still unanswered
    }
    Send(std::move(message));
  }
}

}  // namespace ddp::client
