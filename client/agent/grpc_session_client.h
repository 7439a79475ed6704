#ifndef DDP_CLIENT_AGENT_GRPC_SESSION_CLIENT_H_
#define DDP_CLIENT_AGENT_GRPC_SESSION_CLIENT_H_

// The agent's side of SessionService.Session (ddp/v1/session.proto): one
// bidirectional stream to the coordinator, kept alive across breaks.
//
//   Start --> connecting --Registered--> streaming --stream ends--+
//                ^   |                                           |
//                |   +-- refused for good / timed out --> failed |
//                |                                               |
//                +-- same incarnation (resume), backoff <--------+  (any
//                status)
//                +-- NEW incarnation, generation 0 <-------------+  (ABORTED,
//                                                                    after
//                                                     SessionEvents::OnFenced)
//   Close (any state) --> closed
//
// Connecting retries with Backoff until `connect_timeout` (first registration
// or after a fence) or `resume_timeout` (after a break) has passed since the
// stream was lost, then reports OnSessionFailed with UNAVAILABLE naming the
// address and the last error. A resume registers with the same incarnation and
// the generation set by SetGeneration, so the coordinator keeps the node's
// place and its running workers (Registered.resumed).
//
// Threads: "session-reader" (connect, register, read, deliver events; it also
// runs the SessionEvents callbacks, in stream order), "session-heartbeat"
// (a Heartbeat with SessionEvents::WorkerStates every heartbeat interval of
// the job, while registered) and "session-udp" (reads heartbeat acks over
// UDP). Send may be called from any thread.
//
// Heartbeats over UDP: when Registered names a heartbeat_channel, empty
// heartbeats (worker states unchanged) go as signed datagrams to that port of
// the coordinator's host, and its ack datagrams renew the lease like
// HeartbeatAcks; heartbeats carrying worker states, and any heartbeat while
// the datagram channel is unanswered (SessionCore::SendAsDatagram), go on the
// stream. The channel lives as long as its stream.
//
// Lease: every heartbeat carries a sequence number, and its send time
// (MonotonicClock) is kept until the coordinator's HeartbeatAck for it comes
// back (at most kMaxUnacknowledged); then SessionEvents::OnLeaseRenewed gets
// that send time. A Registered renews the lease from its Register's send time.
// Acks are not delivered as coordinator messages.
//
// Thread-safety: thread-safe. SessionEvents callbacks must not call Close().

#include <cstdint>
#include <deque>
#include <atomic>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/agent/backoff.h"
#include "client/agent/session_core.h"
#include "client/agent/session_link.h"
#include "common/clock.h"
#include "common/coordinator_endpoints.h"
#include "common/heartbeat/udp_socket.h"
#include "common/tls_files.h"
#include "ddp/v1/session.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace ddp::client {

struct SessionClientOptions {
  // "host:port", or several ("a:29400,b:29400,c:29400": the coordinators of
  // an HA deployment). A standby's answer names the leader (ddp-leader),
  // which the next attempt calls at once; a coordinator that cannot be
  // reached is left for the next in the list.
  std::string target;
  TlsClientFiles tls;  // TLS to the coordinator (off when empty)
  std::string token;   // bearer token of every call (none when empty)
  // job_id, node_id, nproc, requested_rank, address, settings, agent_version,
  // token. incarnation and generation are filled by the client.
  v1::Register registration;
  absl::Duration connect_timeout = absl::Seconds(60);
  absl::Duration resume_timeout = absl::Minutes(10);
  // One attempt: wait for the TCP/HTTP2 connection, and then for Registered
  // (checked at the heartbeat cadence), at most this long each.
  absl::Duration attempt_timeout = absl::Seconds(5);
  // With several coordinators: the wait for Registered before the next one
  // is tried (a leader that was paused accepts connections and answers
  // nothing; the agents must reach the new leader well within its first
  // heartbeat timeout).
  absl::Duration failover_attempt_timeout = absl::Milliseconds(1500);
  // While the coordinator cannot be reached: a warning at once, then this
  // often, saying for how long and until when (SessionCore::WaitingNotice).
  absl::Duration waiting_notice_interval = absl::Seconds(10);
  // Until Registered tells the job's.
  absl::Duration default_heartbeat_interval = absl::Milliseconds(500);
  // At most 500 ms between attempts: a resume must fit in the lease (2/3 of
  // heartbeat_timeout, 2 s by default) with room to spare.
  BackoffOptions backoff{absl::Milliseconds(100), absl::Milliseconds(500), 2.0};
  // A stream that lived this long resets the backoff: the next resume is
  // immediate. Shorter-lived streams resume after a backoff delay.
  absl::Duration stable_stream = absl::Seconds(5);
  // An HTTP/2 ping this often on the connection (the coordinator accepts one a
  // second), and the stream ends when one is unanswered for keepalive_timeout
  // (the agent resumes on a new connection). With heartbeats over UDP the
  // stream can be idle for long: a NAT or firewall that forgets an idle TCP
  // flow, or a path that carries UDP but no longer TCP, would otherwise keep a
  // dead stream (and UDP lease renewals) until a write found it.
  absl::Duration keepalive_time = absl::Seconds(20);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // Close: how long the coordinator gets to end the stream after WritesDone.
  absl::Duration close_grace = absl::Seconds(1);
  // Reads the time for every deadline above (resume limit, register
  // deadline, stable stream) and the send times of Register and heartbeats,
  // which renew the lease: it must be the lease's clock (WorkerLease,
  // AgentOptions::monotonic_clock); null: MonotonicClock, which never steps
  // with the wall clock. Waits themselves are relative (durations).
  const Clock* clock = nullptr;
};

class GrpcSessionClient : public CoordinatorLink {
 public:
  // `events` must outlive the client. `incarnation` must be non-zero (see
  // NewIncarnation).
  GrpcSessionClient(SessionClientOptions options, SessionEvents* events, uint64_t incarnation);
  ~GrpcSessionClient() override;  // Close()
  GrpcSessionClient(const GrpcSessionClient&) = delete;
  GrpcSessionClient& operator=(const GrpcSessionClient&) = delete;

  // Starts both threads. Call once.
  void Start();
  // Half-closes the stream (after a final Leave, say), waits up to
  // close_grace for the coordinator to end it, cancels it, joins the threads.
  // Idempotent. Not from a SessionEvents callback.
  void Close();

  void Send(v1::AgentMessage message) override;
  void SetGeneration(int64_t generation) override;
  void LeaseExpired() override;

  uint64_t incarnation() const;
  // Registrations answered so far (resumes included); for tests and logs.
  int registrations() const;

  // A random non-zero 64-bit value.
  static uint64_t NewIncarnation();

 private:
  using Stream = grpc::ClientReaderWriter<v1::AgentMessage, v1::CoordinatorMessage>;

  void ReaderLoop();
  void HeartbeatLoop();
  // One attempt: connect, send Register, wait for Registered. On success the
  // stream is installed as the current one.
  absl::Status ConnectAndRegister(absl::Time deadline, v1::Registered* registered);
  // Reads until the stream ends; returns its final status.
  absl::Status ReadUntilEnd();
  // The lease part of a HeartbeatAck.
  void HandleAck(const v1::HeartbeatAck& ack);
  // Heartbeats over UDP (grpc_session_client_datagrams.cc). After a
  // Registered: opens the socket to the channel it names, if any.
  void OpenHeartbeatChannel();
  // The stream ended: no more datagrams.
  void CloseHeartbeatChannel();
  // Sends what of the heartbeat due now goes as a datagram, as the core
  // routes it (SessionCore::RouteHeartbeat); the stream carries the rest.
  // `states`: the states datagram's payload when the heartbeat carries
  // states; the sequence of a states datagram sent goes to `states_sequence`.
  SessionCore::HeartbeatRoute SendHeartbeatDatagram(bool carries_states,
                                                    const std::string& states,
                                                    uint64_t* states_sequence);
  // "session-udp": reads acks until Close.
  void DatagramLoop();
  // Sleeps `delay` unless Close() comes first; false when closing.
  bool SleepUnlessClosing(absl::Duration delay);
  // Logs SessionCore::WaitingNotice when one is due.
  void NoticeWaiting(const std::string& why);
  bool closing() const;

  const SessionClientOptions options_;
  const Clock& clock_;  // options_.clock, or MonotonicClock
  SessionEvents* const events_;
  // The channel to `endpoint` (one per coordinator, kept).
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& endpoint);
  // The current coordinator (reader thread), for messages.
  std::string current_target() const;

  // Reader thread only.
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;
  std::string leader_hint_;  // ddp-leader of the last call that ended
  bool redirected_last_ = false;

  mutable absl::Mutex mu_;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  // The protocol state: identity, generation, heartbeat acks, what to do
  // when a stream ends.
  SessionCore core_ ABSL_GUARDED_BY(mu_);
  CoordinatorEndpoints endpoints_ ABSL_GUARDED_BY(mu_);
  // Set when a stream is registered: the next heartbeat goes at once (its
  // acknowledgement renews the lease from a fresh send time).
  bool heartbeat_now_ ABSL_GUARDED_BY(mu_) = false;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  // The live stream; writes are serialized by write_mu_.
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  // While waiting for Registered: when the attempt is given up.
  absl::Time register_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // The socket of the current stream's heartbeat channel (shared with the
  // threads using it while the reader replaces it); null: none.
  std::shared_ptr<heartbeat::UdpSocket> udp_ ABSL_GUARDED_BY(mu_);

  absl::Mutex write_mu_ ABSL_ACQUIRED_AFTER(mu_);
  Stream* stream_ ABSL_GUARDED_BY(write_mu_) = nullptr;
  bool half_closed_ ABSL_GUARDED_BY(write_mu_) = false;  // Close() began
  // Messages written on stream_ after Register (changed under write_mu_;
  // read without it): a states datagram's stream mark.
  std::atomic<uint64_t> stream_written_{0};

  // The heartbeat thread's own: the worker states it last sent (a serialized
  // Heartbeat holding only them, as a states datagram carries them), on which
  // registration (a new stream gets them again) and of which generation (a
  // new one gets them again).
  std::string last_worker_states_;
  int worker_states_registration_ = -1;
  int64_t worker_states_generation_ = -1;
  // States sent in a states datagram, sent for good once an ack says they
  // were taken (SessionCore::StatesTaken).
  struct DatagramStates {
    uint64_t sequence = 0;
    std::string states;
    int registration = 0;
    int64_t generation = 0;
  };
  std::optional<DatagramStates> datagram_states_;

  std::thread reader_;
  std::thread heartbeat_;
  std::thread datagrams_;
};

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_GRPC_SESSION_CLIENT_H_
