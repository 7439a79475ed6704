#ifndef DDP_CLIENT_AGENT_SESSION_CORE_H_
#define DDP_CLIENT_AGENT_SESSION_CORE_H_

// The agent side of the Session protocol (ddp/v1/session.proto) without a
// transport: what every client of the coordinator's SessionService shares.
// ddp-client's GrpcSessionClient (blocking threads), the test FakeAgent and
// rdzv_sim's async-API streams drive it; each owns the stream (and any UDP
// socket).
//
//   messages   Register (incarnation, generation, workers_frozen stamped),
//              Heartbeat (sequence numbers; send times kept until acked),
//              the NodeHeader of every other message
//   datagrams  with Registered.heartbeat_channel: which heartbeats go over
//              UDP, their fields and sequence, what their acks renew, when
//              to fall back to the stream (see "Heartbeats over UDP" below)
//   lifecycle  after an attempt or a live stream ends, what to do next:
//              retry after a backoff delay, re-register with a new
//              incarnation (fenced: ABORTED), or give up (a refusal a retry
//              cannot fix, or the coordinator unreachable past the connect
//              or resume timeout); time is read from the injected clock
//
// Thread-safety: none; the owner guards it (GrpcSessionClient with its mutex).

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/agent/backoff.h"
#include "common/clock.h"
#include "common/heartbeat/heartbeat_datagram.h"
#include "ddp/v1/session.pb.h"

namespace ddp::client {

struct SessionCoreOptions {
  std::string target;  // the coordinator's address, for messages
  // job_id, node_id, nproc, requested_rank, address, settings, agent_version,
  // token. incarnation, generation and workers_frozen are stamped.
  v1::Register registration;
  absl::Duration connect_timeout = absl::Seconds(60);
  absl::Duration resume_timeout = absl::Minutes(10);
  // Until Registered tells the job's.
  absl::Duration default_heartbeat_interval = absl::Milliseconds(500);
  // At most 500 ms between attempts: a resume must fit in the lease (2/3 of
  // heartbeat_timeout, 2 s by default) with room to spare.
  BackoffOptions backoff{absl::Milliseconds(100), absl::Milliseconds(500), 2.0};
  // A stream that lived this long resets the backoff: the next resume is
  // immediate. Shorter-lived streams resume after a backoff delay.
  absl::Duration stable_stream = absl::Seconds(5);
  // While the coordinator cannot be reached, a log line says so at once and
  // then this often (WaitingNotice).
  absl::Duration waiting_notice_interval = absl::Seconds(10);
};

// What the owner does next.
struct SessionStep {
  enum class Kind {
    kRetry,   // register again (same incarnation) after `delay`
    kFenced,  // the coordinator refused this incarnation (ABORTED, `status`):
              // stop the workers, then Refenced() and register again
    kGiveUp,  // `status` is final
  };
  Kind kind = Kind::kRetry;
  absl::Duration delay;
  absl::Status status;
};

class SessionCore {
 public:
  SessionCore(SessionCoreOptions options, uint64_t incarnation, const Clock& clock);

  uint64_t incarnation() const { return incarnation_; }
  int64_t generation() const { return generation_; }
  // The generation the node's workers run (0: none); clears a lease expiry.
  void SetGeneration(int64_t generation);
  // The workers' lease ran out and they are frozen: the next Register says so
  // (once: a Registered or SetGeneration clears it).
  void SetWorkersFrozen() { workers_frozen_ = true; }
  const SessionCoreOptions& options() const { return options_; }

  // ---- Messages ----
  // A Register of this incarnation. The acknowledgements of heartbeats sent
  // on an older stream never come: forgotten here.
  v1::AgentMessage RegisterMessage();
  // A Heartbeat of the current generation. `ask_ack`: with a sequence number
  // (the coordinator answers HeartbeatAck), its send time `sent_at` kept for
  // Acknowledged (at most 256 kept: an old coordinator never acks).
  v1::AgentMessage HeartbeatMessage(bool ask_ack, absl::Time sent_at);
  // Stamps job, node and incarnation into the message's NodeHeader (the
  // caller sets the generation the message is about). Register is left as is.
  void StampHeader(v1::AgentMessage* message) const;
  // A header of this node for `generation`.
  v1::NodeHeader Header(int64_t generation) const;
  // The send time of the heartbeat `ack` answers (older unacknowledged ones
  // are dropped); nullopt for an unknown sequence.
  std::optional<absl::Time> Acknowledged(const v1::HeartbeatAck& ack);
  // Whether a heartbeat sent at `now` should ask for an acknowledgement: the
  // lease needs renewing once a third of it has passed since the send time
  // of the last acknowledged heartbeat (then every heartbeat asks until one
  // is answered), always before the first answer and when the coordinator
  // named no lease. At the default 500 ms interval and 2 s lease that is
  // every other heartbeat, with three more chances before the lease ends.
  // `now` is on the clock of HeartbeatMessage's `sent_at`.
  bool AckDue(absl::Time now) const;
  absl::Duration heartbeat_interval() const { return heartbeat_interval_; }

  // ---- Heartbeats over UDP (Registered.heartbeat_channel) ----
  // The current stream's channel; null when none was granted, the
  // coordinator refused a datagram, the owner dropped it (DropHeartbeatChannel)
  // or kMaxDatagramMisses datagrams in a row that asked for an ack went
  // unanswered (UDP blocked on the way: every heartbeat then goes on the
  // stream until the next Registered).
  const v1::HeartbeatChannel* heartbeat_channel() const {
    return channel_.has_value() ? &*channel_ : nullptr;
  }
  void DropHeartbeatChannel() { channel_.reset(); }
  // Whether an empty heartbeat due at `now` goes as a datagram: a channel is
  // up, unless the last datagram that asked for an ack is still unanswered
  // while the lease needs renewing (then this one goes on the stream: a lost
  // datagram costs one stream heartbeat, never the lease).
  bool SendAsDatagram(absl::Time now) const;
  // How the heartbeat due at `now` goes, `carries_states`: whether it carries
  // the workers' states, `states_bytes`: their size as a states datagram's
  // payload (a serialized Heartbeat holding only them).
  //   kDatagram          all of it as a datagram (asking for an ack when one
  //                      is due);
  //   kStatesDatagram    all of it as a states datagram, which asks for an
  //                      ack (the channel takes worker states and they fit:
  //                      heartbeat_datagram.h); the states count as sent
  //                      once an ack says they were taken (StatesTaken);
  //   kStreamAndRenewal  the states on the stream without asking for an ack,
  //                      and a datagram that asks: the lease is renewed over
  //                      UDP as for any other heartbeat (a stream ack costs
  //                      the coordinator several times a datagram's, and a
  //                      restart of N nodes sends N states);
  //   kStream            on the stream, asking when an ack is due (no channel,
  //                      or an asked datagram is still unanswered).
  enum class HeartbeatRoute { kDatagram, kStatesDatagram, kStreamAndRenewal, kStream };
  HeartbeatRoute RouteHeartbeat(bool carries_states, absl::Time now,
                                size_t states_bytes = 0) const;
  // A heartbeat datagram of the current generation (heartbeat_channel() must
  // be set). Every datagram gets a sequence number (the coordinator drops
  // replays); one that asks for an ack is remembered like HeartbeatMessage's.
  heartbeat::DatagramFields HeartbeatDatagram(bool ask_ack, absl::Time sent_at);
  // The fields of a states datagram (it always asks), numbered and remembered
  // as HeartbeatDatagram's.
  heartbeat::DatagramFields StatesDatagram(absl::Time sent_at);
  // Whether an ack said that the states of the states datagram `sequence` (of
  // the current registration) or of a later one were taken.
  bool StatesTaken(uint64_t sequence) const { return states_taken_through_ >= sequence; }
  // An ack datagram, already verified with the channel's key: the send time
  // it renews (as Acknowledged). A refusal drops the channel.
  std::optional<absl::Time> DatagramAnswered(const heartbeat::DatagramFields& ack);
  static constexpr int kMaxDatagramMisses = 3;

  // ---- Lifecycle ----
  // When the current attempt (connect, Register, Registered) must be done:
  // the connect (first registration) or resume timeout after the session was
  // lost.
  absl::Time AttemptDeadline() const;
  // Registered arrived. Returns true when it resumed this incarnation's
  // session (a reconnect), false for its first registration.
  bool OnRegistered(const v1::Registered& registered);
  // The registered stream ended with `status`.
  SessionStep OnStreamEnded(const absl::Status& status);
  // An attempt ended before Registered with `status`.
  SessionStep OnAttemptFailed(absl::Status status);
  // After kFenced, once the workers are stopped: `incarnation` (new,
  // non-zero) registers afresh with generation 0.
  void Refenced(uint64_t incarnation);

  // While no attempt succeeds: a line for the log, the first time at once and
  // then every waiting_notice_interval ("waiting for the coordinator at
  // HOST:PORT (unreachable for 12 s; giving up after 60 s): WHY"); nullopt
  // when none is due. `why`: what the last attempt met.
  std::optional<std::string> WaitingNotice(const std::string& why);
  // After a Registered that ended a wait WaitingNotice spoke of: the line
  // that says so; nullopt otherwise (also clears the wait).
  std::optional<std::string> ReachedNotice();

 private:
  const SessionCoreOptions options_;
  const Clock& clock_;
  Backoff backoff_;
  uint64_t incarnation_;
  int64_t generation_ = 0;
  bool workers_frozen_ = false;  // until SetGeneration
  uint64_t next_sequence_ = 1;
  // Heartbeats not acknowledged yet: (sequence, send time), oldest first.
  std::deque<std::pair<uint64_t, absl::Time>> unacknowledged_;
  absl::Duration heartbeat_interval_;
  absl::Duration lease_;                               // Registered.lease_ms; 0: none
  absl::Time renewed_sent_at_ = absl::InfinitePast();  // of the last acknowledged heartbeat
  std::optional<v1::HeartbeatChannel> channel_;        // of the current stream
  bool datagram_ask_pending_ = false;                  // a datagram asked for an ack, none came yet
  int datagram_misses_ = 0;                            // asks unanswered in a row
  uint64_t states_taken_through_ = 0;  // the last states datagram an ack said was taken
  bool registered_once_ = false;                       // with the current incarnation
  absl::Time lost_at_;  // when the session was last lost (or started)
  // The last WaitingNotice of the current wait; InfinitePast: none yet.
  absl::Time waiting_noticed_at_ = absl::InfinitePast();
  absl::Time registered_at_;
  absl::Status last_error_;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_SESSION_CORE_H_
