#ifndef DDP_COORDINATOR_HTTP_HTTP_LISTENER_H_
#define DDP_COORDINATOR_HTTP_HTTP_LISTENER_H_

// The coordinator's one HTTP listener (cpp-httplib): REST, /metrics, the
// dashboard and health checks are handlers installed on it. Binds like the
// gRPC listener: no SO_REUSEPORT, so a taken port is an error and never a
// second server on one port.
//
// httplib accepts; every connection then goes through a ConnectionGate
// (connection_gate.h): request heads are read there under a deadline, with
// caps per client address and in all, health probes are answered there,
// and only complete requests reach httplib's handlers, on the gate's
// workers. So no client can starve the listener before it is authenticated.
//
// Lifecycle: Start (bound, serving on its own threads) --Stop--> stopped.
// Thread-safety: port() any time; Stop is idempotent, from any thread but a
// handler.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls_files.h"
#include "coordinator/http/connection_gate.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace ddp::http {

class ReloadingCertificate;

struct HttpListenerOptions {
  std::string bind_address = "0.0.0.0";
  int port = 29480;  // 0: any free port
  // Requests handled at once (gate.workers): an event stream holds one while
  // open; connections between requests and heads being read hold none.
  int threads = 64;
  // Connection caps and timeouts (gate.workers is `threads`).
  ConnectionGateOptions gate;
  // GET requests answered by the gate itself, whatever the load (the health
  // probes): quick, never blocking. Null: none.
  ConnectionGate::InlineAnswer answer_inline;
  // HTTPS with the gRPC port's files (plaintext refused); with a client CA,
  // client certificates are required. The certificate and key are read again
  // when they change (checked at most every tls_reload_interval); the client
  // CA is read at start.
  TlsServerFiles tls;
  absl::Duration tls_reload_interval = absl::Seconds(10);
};

class HttpListener {
 public:
  // `install` registers the handlers before the first request can arrive.
  // ALREADY_EXISTS when the address is in use (another coordinator?),
  // UNAVAILABLE for other bind errors, INVALID_ARGUMENT for a bad port or
  // thread count; each message names the address and the flag to change.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(
      const HttpListenerOptions& options, const std::function<void(httplib::Server&)>& install);
  ~HttpListener();
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  int port() const { return port_; }

  // Closes the listening socket and waits for handlers in progress (end
  // long-lived streams first).
  void Stop();

 private:
  HttpListener();
  // httplib::Server, or an SSLServer with options.tls, handing its sockets to
  // gate_.
  absl::Status MakeServer(const HttpListenerOptions& options);

  std::unique_ptr<ReloadingCertificate> certificate_;  // with TLS; before server_
  std::unique_ptr<httplib::Server> server_;
  std::unique_ptr<ConnectionGate> gate_;
  std::function<void()> raise_backlog_;  // once bound
  std::thread thread_;
  int port_ = 0;
};

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_HTTP_LISTENER_H_
