#ifndef DDP_COORDINATOR_SESSION_SESSION_ROUTER_H_
#define DDP_COORDINATOR_SESSION_SESSION_ROUTER_H_

// Routes the rendezvous core's outbound messages to the agent session of
// (job, node, incarnation). Plain C++: the gRPC session reactor implements
// SessionSink; tests use a fake.
//
// A node may briefly have two sessions: a stream that is registering (its
// Register is not yet answered by the core) next to the stream it is about to
// replace. Both are attached, newest first; a message goes to the newest
// session whose incarnation matches it, so neither the old incarnation (if the
// new Register is refused) nor the new one (whose Register may already have
// produced messages) loses anything. Confirm() then detaches the others and
// hands them back for closing; Detach() removes one session.
//
//   Attach --> attached (unconfirmed) --Confirm--> attached (the only one)
//                  |                                   |
//                  +------------ Detach ---------------+--> gone
//
// Messages whose incarnation matches no attached session are dropped and
// counted (the core re-sends what a node waits for when it resumes).
//
// Thread-safety: thread-safe. Sinks are called without the router's lock held;
// one thread (the commit loop's delivery thread) calls Route, so each sink sees messages in
// order.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/rendezvous/job_types.h"

namespace ddp::session {

// One agent session (a stream). Implementations are thread-safe and must not
// block: Deliver queues, Close starts closing.
class SessionSink {
 public:
  virtual ~SessionSink() = default;
  virtual void Deliver(const rendezvous::OutboundMessage& message) = 0;
  // Ends the session with `status` (e.g. ABORTED when replaced).
  virtual void Close(const absl::Status& status) = 0;
};

class SessionRouter {
 public:
  using SinkPtr = std::shared_ptr<SessionSink>;

  // Adds `sink` as the newest session of (job, node) for `incarnation`.
  void Attach(const std::string& job_id, const std::string& node_id,
              rendezvous::Incarnation incarnation, SinkPtr sink);
  // The core accepted the registration of `sink`: every other session of
  // (job, node) is detached and returned (the caller closes them). Empty when
  // `sink` is no longer attached.
  std::vector<SinkPtr> Confirm(const std::string& job_id, const std::string& node_id,
                               const SessionSink* sink);
  // Removes `sink`. Returns whether it was still attached (false when a newer
  // session displaced it through Confirm).
  bool Detach(const std::string& job_id, const std::string& node_id, const SessionSink* sink);

  // Delivers to the newest session of (job, node) with the message's
  // incarnation; returns false (and counts a drop) when there is none.
  bool Route(const rendezvous::OutboundMessage& message);

  // Detaches every session and closes it with `status` (coordinator
  // shutdown).
  void CloseAll(const absl::Status& status);

  int64_t routed() const;
  int64_t dropped() const;
  // Attached sessions, all nodes together.
  int session_count() const;

 private:
  struct Session {
    rendezvous::Incarnation incarnation = 0;
    SinkPtr sink;
  };
  using Key = std::pair<std::string, std::string>;  // (job, node)

  mutable absl::Mutex mu_;
  // Per node, newest session last (usually exactly one).
  absl::flat_hash_map<Key, std::vector<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  int session_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t routed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ddp::session

#endif  // DDP_COORDINATOR_SESSION_SESSION_ROUTER_H_
