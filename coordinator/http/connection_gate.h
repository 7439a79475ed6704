#ifndef DDP_COORDINATOR_HTTP_CONNECTION_GATE_H_
#define DDP_COORDINATOR_HTTP_CONNECTION_GATE_H_

// The door of the HTTP listener (issue 23: 200 half-sent requests left /healthz
// answering 1 of 10, trickled headers 0 of 10, 500 event-stream attempts
// timed everything out). cpp-httplib gives each connection a thread of its
// pool from accept to close, reading with a timeout per recv(): a client that
// sends nothing, or a byte every few seconds, holds a thread for good. Here a
// connection holds a thread only while one of its requests is handled:
//
//   accepted --> [gate thread: TLS handshake, read the request head,
//                 header_timeout from accept; epoll, no thread per connection]
//      |-- a health probe (GET /healthz, /readyz): answered here, closed
//      |-- over a connection cap: 429/503 answered here, closed
//      |-- head complete --> [a worker: serve() handles the request, reading
//      |                      its body within body_timeout]
//      |                        |-- keep-alive: back to the gate, which waits
//      |                        |   keep_alive_timeout for the next request
//      |                        +-- else closed
//      +-- timeout, EOF, a head over max_head_bytes: closed (408, 431)
//
// So slow or silent clients cost a descriptor and a few KiB, never a worker,
// and probes are answered by the gate thread whatever the workers do.
//
// Caps, counted over connections open anywhere (gate or worker):
// max_connections_per_client per remote address and max_connections in all.
// A connection over a cap is still read (so a probe on it is answered); any
// other request on it gets 429 (per client) or 503 (in all) and is closed.
// Beyond twice max_connections the gate closes new connections unread.
//
// Thread-safety: Add from any thread (httplib's accept loop); serve() and
// the I/O methods of GateConnection run on one worker at a time per
// connection; Stop from any thread but a worker.

#include <openssl/ssl.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ddp::http {

struct ConnectionGateOptions {
  // Workers: requests handled at once (an event stream holds one while open).
  int workers = 64;
  size_t max_connections = 1024;
  size_t max_connections_per_client = 64;
  // A request head (and a TLS handshake first) must arrive whole within this
  // from accept, or from the end of the previous response.
  absl::Duration header_timeout = absl::Seconds(10);
  // A request body must arrive whole within this after its head.
  absl::Duration body_timeout = absl::Seconds(30);
  // A kept-alive connection that sends nothing for this long is closed.
  absl::Duration keep_alive_timeout = absl::Seconds(5);
  // One write (or wait to write) blocked this long ends the connection.
  absl::Duration write_timeout = absl::Seconds(5);
  size_t max_head_bytes = 16 << 10;
  // Requests on one connection before it is closed.
  int keep_alive_max_count = 1000;
};

// A reply the gate writes itself (then closes the connection).
struct GateReply {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
};

// One client connection: its socket (non-blocking), TLS session, and bytes
// read but not yet consumed (the request head the gate read, and anything
// after it). Owned by the gate; lent to one worker while it serves.
class GateConnection {
 public:
  GateConnection(int fd, std::string peer, int peer_port)
      : fd_(fd), peer_(std::move(peer)), peer_port_(peer_port) {}
  ~GateConnection();
  GateConnection(const GateConnection&) = delete;
  GateConnection& operator=(const GateConnection&) = delete;

  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }
  int peer_port() const { return peer_port_; }
  // This end's address and *port, read from the socket ("" and 0 if that
  // fails).
  std::string LocalAddress(int* port) const;

  // Up to `size` bytes: buffered ones first, else what arrives before
  // `deadline`. 0 at end of stream; -1 on error or when the deadline passed.
  ssize_t Read(char* out, size_t size, absl::Time deadline);
  // True when buffered bytes wait or the socket is readable before `deadline`.
  bool WaitReadable(absl::Time deadline);
  // Writes everything; false on error or when a wait for the socket to take
  // more lasts `timeout`.
  bool Write(const char* data, size_t size, absl::Duration timeout);
  // True when the socket can take more within `timeout`.
  bool WaitWritable(absl::Duration timeout);

 private:
  friend class ConnectionGate;
  enum class Phase { kHandshake, kHead };

  // Reads what the socket has without waiting into pending_ (at most
  // `limit` bytes in all). Returns false at end of stream or on error;
  // *want_write when TLS needs the socket writable first.
  bool ReadAvailable(size_t limit, bool* want_write);
  // Bytes of pending_ not yet consumed.
  size_t buffered() const { return pending_.size() - consumed_; }
  absl::string_view unconsumed() const { return absl::string_view(pending_).substr(consumed_); }
  void Compact();

  const int fd_;
  const std::string peer_;
  const int peer_port_;
  SSL* ssl_ = nullptr;
  std::string pending_;
  size_t consumed_ = 0;
  // Gate state.
  Phase phase_ = Phase::kHead;
  bool counted_ = false;     // within the caps (else: probes only)
  bool over_total_ = false;  // over max_connections (else over the per-client cap)
  bool resumed_ = false;     // waits for a second or later request
  int requests_ = 0;
  absl::Time head_deadline_;  // the whole head by then
  absl::Time idle_deadline_;  // a first byte by then (kept-alive connections)
  uint32_t events_ = 0;       // epoll interest
};

class ConnectionGate {
 public:
  // `answer_inline(method, target)`: a reply the gate gives itself for this
  // request (health probes; quick, never blocking), or nullopt.
  using InlineAnswer =
      std::function<std::optional<GateReply>(absl::string_view method, absl::string_view target)>;
  // Handles the request whose head starts the connection's buffer (on a
  // worker); returns true to keep the connection for the next request.
  using Serve = std::function<bool(GateConnection& connection, bool last_request)>;

  // `tls`: with it, connections speak TLS (its SSL_CTX must outlive the gate).
  ConnectionGate(ConnectionGateOptions options, SSL_CTX* tls, InlineAnswer answer_inline,
                 Serve serve);
  ~ConnectionGate();  // Stop()
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // Starts the gate thread and the workers. INTERNAL if epoll cannot be set
  // up.
  absl::Status Start();
  // Takes an accepted socket (any thread). Closes it when stopped.
  void Add(int fd);
  // Closes waiting connections, ends those being served (their sockets are
  // shut down), joins every thread. Idempotent.
  void Stop();

  struct Stats {
    size_t open = 0;               // connections open (gate and workers)
    int64_t refused_over_cap = 0;  // requests answered 429/503
    int64_t closed_unread = 0;     // connections closed at once (over twice the cap)
    int64_t timed_out = 0;         // heads that missed header_timeout
  };
  Stats stats() const;

 private:
  void GateThread();
  void WorkerThread();
  // Gate thread: reads what arrived; dispatches a complete head.
  void Progress(std::unique_ptr<GateConnection> connection);
  // Gate thread: a complete head: answered here, or handed to a worker.
  void Dispatch(std::unique_ptr<GateConnection> connection);
  void Watch(std::unique_ptr<GateConnection> connection, uint32_t events);
  void Unwatch(GateConnection& connection);
  // Writes `reply` (best effort, without waiting) and closes.
  void ReplyAndClose(std::unique_ptr<GateConnection> connection, const GateReply& reply);
  void Close(std::unique_ptr<GateConnection> connection);
  void Expire(absl::Time now);
  void Wake();

  const ConnectionGateOptions options_;
  SSL_CTX* const tls_;
  const InlineAnswer answer_inline_;
  const Serve serve_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread gate_thread_;
  std::vector<std::thread> workers_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // New and kept-alive connections for the gate thread to watch.
  std::vector<std::unique_ptr<GateConnection>> incoming_ ABSL_GUARDED_BY(mu_);
  // Complete heads for the workers.
  std::deque<std::unique_ptr<GateConnection>> ready_ ABSL_GUARDED_BY(mu_);
  // Connections being served (their sockets are shut down by Stop); each
  // lives while it is here.
  absl::flat_hash_set<GateConnection*> serving_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, size_t> per_client_ ABSL_GUARDED_BY(mu_);
  size_t counted_ ABSL_GUARDED_BY(mu_) = 0;
  size_t open_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_over_cap_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t closed_unread_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t timed_out_ ABSL_GUARDED_BY(mu_) = 0;

  // Gate thread only: the connections it watches, by socket.
  std::map<int, std::unique_ptr<GateConnection>> waiting_;
};

// The method and target of a request head ("GET", "/healthz?x=1"); empty
// when its first line is not "METHOD TARGET VERSION".
std::pair<absl::string_view, absl::string_view> RequestLine(absl::string_view head);
// Where a request head ends (just past its empty line), or npos.
size_t HeadEnd(absl::string_view bytes);

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_CONNECTION_GATE_H_
