#include "client/agent/session_core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/agent/session_link.h"
#include "common/logging.h"

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

}  // namespace

SessionCore::SessionCore(SessionCoreOptions options, uint64_t incarnation, const Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      backoff_(options_.backoff),
      incarnation_(incarnation),
      heartbeat_interval_(options_.default_heartbeat_interval),
      lost_at_(clock.Now()) {}

void SessionCore::SetGeneration(int64_t generation) {
  generation_ = generation;
  workers_frozen_ = false;
}

v1::AgentMessage SessionCore::RegisterMessage() {
  v1::AgentMessage message;
  v1::Register* reg = message.mutable_register_();
  *reg = options_.registration;
  reg->set_incarnation(incarnation_);
  reg->set_generation(generation_);
  reg->set_workers_frozen(workers_frozen_);
  unacknowledged_.clear();
  return message;
}

v1::AgentMessage SessionCore::HeartbeatMessage(bool ask_ack, absl::Time sent_at) {
  v1::AgentMessage message;
  v1::Heartbeat* heartbeat = message.mutable_heartbeat();
  *heartbeat->mutable_header() = Header(generation_);
  if (ask_ack && datagram_ask_pending_) {
    // The datagram's ack did not come: this heartbeat renews the lease instead.
    datagram_ask_pending_ = false;
    if (++datagram_misses_ >= kMaxDatagramMisses && channel_.has_value()) {
      DDP_LOG(WARNING) << "no answer to " << datagram_misses_
                       << " heartbeat datagrams in a row from UDP port " << channel_->udp_port()
                       << " of the coordinator at " << options_.target
                       << " (is UDP blocked on the way?); heartbeating on the stream until the "
                          "next registration";
      channel_.reset();
    }
  }
  if (ask_ack) {
    heartbeat->set_sequence(next_sequence_++);
    if (unacknowledged_.size() >= kMaxUnacknowledged) unacknowledged_.pop_front();
    unacknowledged_.emplace_back(heartbeat->sequence(), sent_at);
  }
  return message;
}

v1::NodeHeader SessionCore::Header(int64_t generation) const {
  v1::NodeHeader header;
  header.set_job_id(options_.registration.job_id());
  header.set_node_id(options_.registration.node_id());
  header.set_incarnation(incarnation_);
  header.set_generation(generation);
  return header;
}

void SessionCore::StampHeader(v1::AgentMessage* message) const {
  v1::NodeHeader* header = MutableHeader(message);
  if (header == nullptr) return;
  header->set_job_id(options_.registration.job_id());
  header->set_node_id(options_.registration.node_id());
  header->set_incarnation(incarnation_);
}

std::optional<absl::Time> SessionCore::Acknowledged(const v1::HeartbeatAck& ack) {
  std::optional<absl::Time> sent_at;
  while (!unacknowledged_.empty() && unacknowledged_.front().first <= ack.sequence()) {
    if (unacknowledged_.front().first == ack.sequence()) sent_at = unacknowledged_.front().second;
    unacknowledged_.pop_front();
  }
  if (sent_at) renewed_sent_at_ = std::max(renewed_sent_at_, *sent_at);
  return sent_at;
}

bool SessionCore::SendAsDatagram(absl::Time now) const {
  return channel_.has_value() && !(datagram_ask_pending_ && AckDue(now));
}

SessionCore::HeartbeatRoute SessionCore::RouteHeartbeat(bool carries_states, absl::Time now,
                                                        size_t states_bytes) const {
  if (!SendAsDatagram(now)) return HeartbeatRoute::kStream;
  if (!carries_states) return HeartbeatRoute::kDatagram;
  if (channel_->worker_states() && states_bytes <= heartbeat::kMaxStatesPayload) {
    return HeartbeatRoute::kStatesDatagram;
  }
  return AckDue(now) ? HeartbeatRoute::kStreamAndRenewal : HeartbeatRoute::kStream;
}

heartbeat::DatagramFields SessionCore::HeartbeatDatagram(bool ask_ack, absl::Time sent_at) {
  heartbeat::DatagramFields fields;
  fields.kind = heartbeat::DatagramKind::kHeartbeat;
  fields.flag = ask_ack;
  fields.session = channel_.has_value() ? channel_->session() : 0;
  fields.sequence = next_sequence_++;
  fields.generation = generation_;
  if (ask_ack) {
    datagram_ask_pending_ = true;
    if (unacknowledged_.size() >= kMaxUnacknowledged) unacknowledged_.pop_front();
    unacknowledged_.emplace_back(fields.sequence, sent_at);
  }
  return fields;
}

heartbeat::DatagramFields SessionCore::StatesDatagram(absl::Time sent_at) {
  heartbeat::DatagramFields fields = HeartbeatDatagram(/*ask_ack=*/true, sent_at);
  fields.kind = heartbeat::DatagramKind::kStates;
  return fields;
}

std::optional<absl::Time> SessionCore::DatagramAnswered(const heartbeat::DatagramFields& ack) {
  datagram_ask_pending_ = false;
  if (ack.states_taken) states_taken_through_ = std::max(states_taken_through_, ack.sequence);
  if (ack.flag) {  // refused: the stream carries heartbeats (and the refusal) from now on
    channel_.reset();
    return std::nullopt;
  }
  datagram_misses_ = 0;
  v1::HeartbeatAck proto;
  proto.set_sequence(ack.sequence);
  proto.set_running_generation(ack.generation);
  return Acknowledged(proto);
}

bool SessionCore::AckDue(absl::Time now) const {
  return lease_ <= absl::ZeroDuration() || now - renewed_sent_at_ >= lease_ / 3;
}

absl::Time SessionCore::AttemptDeadline() const {
  return lost_at_ + (registered_once_ ? options_.resume_timeout : options_.connect_timeout);
}

bool SessionCore::OnRegistered(const v1::Registered& registered) {
  const bool resumed = registered_once_;
  registered_once_ = true;
  registered_at_ = clock_.Now();
  workers_frozen_ = false;  // told
  lease_ = absl::Milliseconds(registered.lease_ms());
  channel_.reset();
  datagram_ask_pending_ = false;
  datagram_misses_ = 0;
  states_taken_through_ = 0;
  const v1::HeartbeatChannel& channel = registered.heartbeat_channel();
  if (registered.has_heartbeat_channel() && channel.udp_port() > 0 && channel.udp_port() <= 65535 &&
      channel.key().size() == heartbeat::kKeySize) {
    channel_ = channel;
  }
  if (registered.settings().heartbeat_interval_ms() > 0) {
    heartbeat_interval_ = absl::Milliseconds(registered.settings().heartbeat_interval_ms());
  }
  return resumed;
}

SessionStep SessionCore::OnStreamEnded(const absl::Status& status) {
  lost_at_ = clock_.Now();
  channel_.reset();  // valid while its stream is open
  if (status.code() == absl::StatusCode::kAborted) {
    return SessionStep{SessionStep::Kind::kFenced, absl::ZeroDuration(), status};
  }
  // Any other code ending a live stream (a refused message, a broken
  // connection, a coordinator shutting down) is answered by resuming; a
  // refusal that still holds shows up as the answer to that Register. A stream
  // that keeps ending soon after registering (a message the coordinator
  // refuses again and again) must not spin: back off.
  absl::Duration delay = absl::ZeroDuration();
  if (lost_at_ - registered_at_ >= options_.stable_stream) {
    backoff_.Reset();
  } else {
    delay = backoff_.NextDelay();
  }
  return SessionStep{SessionStep::Kind::kRetry, delay, status};
}

SessionStep SessionCore::OnAttemptFailed(absl::Status status) {
  if (status.code() == absl::StatusCode::kAborted) {
    return SessionStep{SessionStep::Kind::kFenced, absl::ZeroDuration(), status};
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
    return SessionStep{SessionStep::Kind::kGiveUp, absl::ZeroDuration(), status};
  }
  last_error_ = status;
  const absl::Duration limit =
      registered_once_ ? options_.resume_timeout : options_.connect_timeout;
  const absl::Duration delay = backoff_.NextDelay();
  if (clock_.Now() + delay - lost_at_ > limit) {
    return SessionStep{
        SessionStep::Kind::kGiveUp, absl::ZeroDuration(),
        absl::UnavailableError(absl::StrCat("coordinator at ", options_.target, " unreachable for ",
                                            absl::FormatDuration(limit), " (",
                                            registered_once_ ? "resume" : "connect",
                                            " timeout); last error: ", last_error_.ToString()))};
  }
  return SessionStep{SessionStep::Kind::kRetry, delay, status};
}

std::optional<std::string> SessionCore::WaitingNotice(const std::string& why) {
  const absl::Time now = clock_.Now();
  if (waiting_noticed_at_ != absl::InfinitePast() &&
      now - waiting_noticed_at_ < options_.waiting_notice_interval) {
    return std::nullopt;
  }
  waiting_noticed_at_ = now;
  const absl::Duration limit =
      registered_once_ ? options_.resume_timeout : options_.connect_timeout;
  return absl::StrCat("waiting for the coordinator at ", options_.target, " (unreachable for ",
                      absl::ToInt64Seconds(now - lost_at_), " s; giving up after ",
                      absl::FormatDuration(limit), ", ",
                      registered_once_ ? "the resume timeout" : "--connect-timeout", "): ", why);
}

std::optional<std::string> SessionCore::ReachedNotice() {
  if (waiting_noticed_at_ == absl::InfinitePast()) return std::nullopt;
  waiting_noticed_at_ = absl::InfinitePast();
  return absl::StrCat(
      "reached the coordinator at ", options_.target, " after ",
      absl::FormatDuration(absl::Trunc(clock_.Now() - lost_at_, absl::Milliseconds(100))));
}

void SessionCore::Refenced(uint64_t incarnation) {
  incarnation_ = incarnation;
  generation_ = 0;
  registered_once_ = false;
  lost_at_ = clock_.Now();
  backoff_.Reset();
}

}  // namespace ddp::client
