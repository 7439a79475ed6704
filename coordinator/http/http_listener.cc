#include "coordinator/http/http_listener.h"

#include <sys/socket.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "coordinator/http/reloading_certificate.h"
#include "coordinator/server/listen_address.h"
#include "httplib.h"

namespace ddp::http {
namespace {

// httplib's default also sets SO_REUSEPORT, which would let a second
// coordinator bind the same port.
void ExclusiveSocketOptions(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

}  // namespace

HttpListener::HttpListener() = default;

absl::Status HttpListener::MakeServer(const HttpListenerOptions& options) {
  if (!options.tls.enabled()) {
    server_ = std::make_unique<httplib::Server>();
    return absl::OkStatus();
  }
  certificate_ = std::make_unique<ReloadingCertificate>(options.tls.cert, options.tls.key,
                                                        options.tls_reload_interval);
  if (absl::Status loaded = certificate_->Load(); !loaded.ok()) return loaded;
  ReloadingCertificate* certificate = certificate_.get();
  const std::string client_ca = options.tls.client_ca;
  auto server = std::make_unique<httplib::SSLServer>([certificate, client_ca](SSL_CTX& ctx) {
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
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot set up TLS for HTTP with --tls-client-ca=", client_ca, " (not PEM?)"));
  }
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
  const int threads = options.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_socket_options(ExclusiveSocketOptions);
  server.set_keep_alive_max_count(1000);
  // Small replies: without it Nagle holds each one for the delayed ACK (~40 ms).
  server.set_tcp_nodelay(true);
  install(server);

  std::string host = options.bind_address;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const int port = options.port == 0 ? server.bind_to_any_port(host) : options.port;
  const bool bound = options.port == 0 ? port > 0 : server.bind_to_port(host, port);
  if (!bound) {
    absl::Status why =
        server::DiagnoseListen(options.bind_address, options.port, "HTTP", "--http-port");
    if (why.ok()) {
      why = absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options.bind_address,
                                                ":", options.port,
                                                "; pick another --http-port or --bind"));
    }
    return why;
  }
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
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace ddp::http
