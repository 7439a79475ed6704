#include "coordinator/http/http_listener.h"

#include <sys/socket.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "coordinator/http/reloading_certificate.h"
#include "common/listen_address.h"
#include "httplib.h"

namespace ddp::http {
namespace {

// httplib's default also sets SO_REUSEPORT, which would let a second
// coordinator bind the same port.
void ExclusiveSocketOptions(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

// httplib's Stream over a connection the gate lent to a worker: its head
// is buffered already; the rest of the request must arrive within the body
// deadline; each write may wait write_timeout.
class GateStream final : public httplib::Stream {
 public:
  GateStream(GateConnection& connection, const ConnectionGateOptions& options)
      : connection_(connection),
        read_deadline_(absl::Now() + options.body_timeout),
        write_timeout_(options.write_timeout) {}

  bool is_readable() const override { return connection_.WaitReadable(read_deadline_); }
  bool is_writable() const override { return connection_.WaitWritable(write_timeout_); }
  ssize_t read(char* ptr, size_t size) override {
    return connection_.Read(ptr, size, read_deadline_);
  }
  ssize_t write(const char* ptr, size_t size) override {
    return connection_.Write(ptr, size, write_timeout_) ? static_cast<ssize_t>(size) : -1;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = connection_.peer();
    port = connection_.peer_port();
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = connection_.LocalAddress(&port);
  }
  socket_t socket() const override { return connection_.fd(); }

 private:
  GateConnection& connection_;
  const absl::Time read_deadline_;
  const absl::Duration write_timeout_;
};

// httplib's Server or SSLServer whose accepted sockets go to the gate instead
// of a pool thread each; the gate's workers call Serve, which runs httplib's
// request handling (routing, handlers, the reply) over a GateStream. With
// TLS the gate does the handshake (on the SSL_CTX httplib set up).
template <typename Base>
class GatedServer final : public Base {
 public:
  template <typename... Args>
  explicit GatedServer(Args&&... args) : Base(std::forward<Args>(args)...) {}

  // The gate its accepted sockets go to (TLS over `tls` when set); its
  // workers serve each request with Serve.
  std::unique_ptr<ConnectionGate> MakeGate(const ConnectionGateOptions& options, SSL_CTX* tls,
                                           ConnectionGate::InlineAnswer answer_inline) {
    auto gate =
        std::make_unique<ConnectionGate>(options, tls, std::move(answer_inline),
                                         [this, options](GateConnection& connection, bool last) {
                                           return Serve(connection, last, options);
                                         });
    gate_ = gate.get();
    return gate;
  }

  // httplib 0.11 listens with a backlog of 5: a burst of connections (probes,
  // a dashboard, a flood) overflows it and clients wait out SYN retries
  // (1 s, 3 s, ...) before the gate even sees them.
  void RaiseBacklog() { ::listen(this->svr_sock_, SOMAXCONN); }

  // One request; true when the connection may carry another.
  bool Serve(GateConnection& connection, bool last_request, const ConnectionGateOptions& options) {
    GateStream stream(connection, options);
    bool connection_closed = false;
    const bool ok = this->process_request(stream, last_request, connection_closed, nullptr);
    return ok && !connection_closed;
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    gate_->Add(sock);
    return true;
  }

  ConnectionGate* gate_ = nullptr;
};

}  // namespace

HttpListener::HttpListener() = default;

absl::Status HttpListener::MakeServer(const HttpListenerOptions& options) {
  ConnectionGateOptions gate_options = options.gate;
  gate_options.workers = options.threads;
  if (!options.tls.enabled()) {
    auto server = std::make_unique<GatedServer<httplib::Server>>();
    gate_ = server->MakeGate(gate_options, nullptr, options.answer_inline);
    raise_backlog_ = [gated = server.get()] { gated->RaiseBacklog(); };
    server_ = std::move(server);
    return absl::OkStatus();
  }
  certificate_ = std::make_unique<ReloadingCertificate>(options.tls.cert, options.tls.key,
                                                        options.tls_reload_interval);
  if (absl::Status loaded = certificate_->Load(); !loaded.ok()) return loaded;
  ReloadingCertificate* certificate = certificate_.get();
  const std::string client_ca = options.tls.client_ca;
  auto server =
      std::make_unique<GatedServer<httplib::SSLServer>>([certificate, client_ca](SSL_CTX& ctx) {
        SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
        SSL_CTX_set_cert_cb(&ctx, &ReloadingCertificate::CertCallback, certificate);
        if (!client_ca.empty()) {
          if (SSL_CTX_load_verify_locations(&ctx, client_ca.c_str(), nullptr) != 1) return false;
          SSL_CTX_set_client_CA_list(&ctx, SSL_load_client_CA_file(client_ca.c_str()));
          SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
        }
        return true;
      });
  if (!server->is_valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot set up TLS for HTTP with --tls-client-ca=", client_ca, " (not PEM?)"));
  }
  gate_ = server->MakeGate(gate_options, server->ssl_context(), options.answer_inline);
  raise_backlog_ = [gated = server.get()] { gated->RaiseBacklog(); };
  server_ = std::move(server);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(
    const HttpListenerOptions& options, const std::function<void(httplib::Server&)>& install) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-port ", options.port, " is out of range; give 0 to 65535 (0 turns HTTP off)"));
  }
  if (options.threads < 1 || options.threads > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP threads ", options.threads, " is out of range 1..4096"));
  }
  std::unique_ptr<HttpListener> listener(new HttpListener());
  if (absl::Status made = listener->MakeServer(options); !made.ok()) return made;
  httplib::Server& server = *listener->server_;
  // httplib's pool only hands accepted sockets to the gate.
  server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  server.set_socket_options(ExclusiveSocketOptions);
  install(server);
  if (absl::Status started = listener->gate_->Start(); !started.ok()) return started;

  std::string host = options.bind_address;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const int port = options.port == 0 ? server.bind_to_any_port(host) : options.port;
  const bool bound = options.port == 0 ? port > 0 : server.bind_to_port(host, port);
  if (!bound) {
    absl::Status why =
        DiagnoseListen(options.bind_address, options.port, "HTTP", "--http-port");
    if (why.ok()) {
      why = absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options.bind_address,
                                                ":", options.port,
                                                "; pick another --http-port or --bind"));
    }
    return why;
  }
  listener->raise_backlog_();
  listener->port_ = port;
  listener->thread_ = std::thread([&server] { server.listen_after_bind(); });
  // stop() is a no-op until the accept loop runs; wait for it so that a Stop
  // right after Start cannot leave the thread accepting forever.
  for (int i = 0; i < 5000 && !server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  DDP_LOG(INFO) << "serving " << (options.tls.enabled() ? "HTTPS" : "HTTP") << " on "
                << options.bind_address << ":" << port;
  return listener;
}

HttpListener::~HttpListener() { Stop(); }

void HttpListener::Stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
  if (gate_ != nullptr) gate_->Stop();
}

}  // namespace ddp::http
