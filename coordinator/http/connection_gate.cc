#include "coordinator/http/connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace ddp::http {
namespace {

// How often the gate thread looks for connections past their deadlines.
constexpr int kExpirySliceMs = 100;
// What one worker read takes from the socket at most (httplib reads a head
// one byte at a time: it is served from this buffer).
constexpr size_t kReadChunk = 16 << 10;

// Writes to a closed socket (TLS writes go through write(2)) give EPIPE, not
// a signal, on the gate's threads.
void BlockSigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// poll(2) on one descriptor: > 0 ready, 0 timed out, < 0 error.
int PollFd(int fd, short events, absl::Duration timeout) {
  const int64_t ms =
      std::max<int64_t>(0, absl::ToInt64Milliseconds(absl::Ceil(
                               std::max(timeout, absl::ZeroDuration()), absl::Milliseconds(1))));
  pollfd p{fd, events, 0};
  while (true) {
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

// The address of `fd`'s peer, or of its own end, as text; and its port.
std::string AddressOf(int fd, bool peer, int* port) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  *port = 0;
  const int got = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length)
                       : getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (got != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    *port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    *port = ntohs(in6->sin6_port);
  }
  return text;
}

std::string PeerOf(int fd, int* port) {
  std::string peer = AddressOf(fd, /*peer=*/true, port);
  // An IPv4 client of a dual-stack socket is the same client as over IPv4.
  if (absl::StartsWith(peer, "::ffff:") && peer.find('.') != std::string::npos) {
    peer = peer.substr(7);
  }
  return peer;
}

const char* StatusText(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 408:
      return "Request Timeout";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

std::string Render(const GateReply& reply) {
  return absl::StrCat("HTTP/1.1 ", reply.status, " ", StatusText(reply.status),
                      "\r\nContent-Type: ", reply.content_type,
                      "\r\nContent-Length: ", reply.body.size(), "\r\nConnection: close\r\n\r\n",
                      reply.body);
}

// The REST API's error shape ({code, message, details}; docs/api.md), for
// the few errors the gate answers itself. `message` holds no quote or
// backslash.
GateReply ErrorReply(int status, int grpc_code, const std::string& message) {
  return GateReply{
      status, "application/json; charset=utf-8",
      absl::StrCat("{\"code\":", grpc_code, ",\"message\":\"", message, "\",\"details\":[]}\n")};
}

}  // namespace

std::pair<absl::string_view, absl::string_view> RequestLine(absl::string_view head) {
  const size_t eol = head.find_first_of("\r\n");
  const absl::string_view line = head.substr(0, eol);
  const size_t first = line.find(' ');
  if (first == absl::string_view::npos) return {};
  const size_t second = line.find(' ', first + 1);
  if (second == absl::string_view::npos) return {};
  return {line.substr(0, first), line.substr(first + 1, second - first - 1)};
}

size_t HeadEnd(absl::string_view bytes) {
  const size_t crlf = bytes.find("\r\n\r\n");
  const size_t lf = bytes.find("\n\n");
  if (crlf == absl::string_view::npos && lf == absl::string_view::npos) {
    return absl::string_view::npos;
  }
  if (lf == absl::string_view::npos || (crlf != absl::string_view::npos && crlf < lf)) {
    return crlf + 4;
  }
  return lf + 2;
}

std::string GateConnection::LocalAddress(int* port) const {
  return AddressOf(fd_, /*peer=*/false, port);
}

GateConnection::~GateConnection() {
  if (ssl_ != nullptr) {
    SSL_shutdown(ssl_);  // best effort: the socket does not wait
    SSL_free(ssl_);
  }
  if (fd_ >= 0) close(fd_);
}

void GateConnection::Compact() {
  if (consumed_ == pending_.size()) {
    pending_.clear();
    consumed_ = 0;
  } else if (consumed_ > kReadChunk && consumed_ > pending_.size() / 2) {
    pending_.erase(0, consumed_);
    consumed_ = 0;
  }
}

bool GateConnection::ReadAvailable(size_t limit, bool* want_write) {
  *want_write = false;
  char chunk[kReadChunk];
  while (buffered() < limit) {
    const size_t room = std::min(sizeof(chunk), limit - buffered());
    if (ssl_ != nullptr) {
      const int n = SSL_read(ssl_, chunk, static_cast<int>(room));
      if (n > 0) {
        pending_.append(chunk, static_cast<size_t>(n));
        continue;
      }
      const int error = SSL_get_error(ssl_, n);
      if (error == SSL_ERROR_WANT_READ) return true;
      if (error == SSL_ERROR_WANT_WRITE) {
        *want_write = true;
        return true;
      }
      return false;  // closed, or a TLS error
    }
    const ssize_t n = recv(fd_, chunk, room, 0);
    if (n > 0) {
      pending_.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;  // end of stream, or an error
  }
  return true;
}

ssize_t GateConnection::Read(char* out, size_t size, absl::Time deadline) {
  while (true) {
    if (buffered() > 0) {
      const size_t n = std::min(size, buffered());
      std::memcpy(out, pending_.data() + consumed_, n);
      consumed_ += n;
      Compact();
      return static_cast<ssize_t>(n);
    }
    bool want_write = false;
    const bool open = ReadAvailable(buffered() + kReadChunk, &want_write);
    if (buffered() > 0) continue;
    if (!open) return 0;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return -1;
    if (PollFd(fd_, want_write ? POLLOUT : POLLIN, left) <= 0) return -1;
  }
}

bool GateConnection::WaitReadable(absl::Time deadline) {
  if (buffered() > 0 || (ssl_ != nullptr && SSL_pending(ssl_) > 0)) return true;
  return PollFd(fd_, POLLIN, deadline - absl::Now()) > 0;
}

bool GateConnection::Write(const char* data, size_t size, absl::Duration timeout) {
  size_t done = 0;
  while (done < size) {
    short wait_for = POLLOUT;
    if (ssl_ != nullptr) {
      const int n =
          SSL_write(ssl_, data + done, static_cast<int>(std::min<size_t>(size - done, 1 << 30)));
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      const int error = SSL_get_error(ssl_, n);
      if (error == SSL_ERROR_WANT_READ) {
        wait_for = POLLIN;
      } else if (error != SSL_ERROR_WANT_WRITE) {
        return false;
      }
    } else {
      const ssize_t n = send(fd_, data + done, size - done, MSG_NOSIGNAL);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return false;
    }
    if (PollFd(fd_, wait_for, timeout) <= 0) return false;
  }
  return true;
}

bool GateConnection::WaitWritable(absl::Duration timeout) {
  return PollFd(fd_, POLLOUT, timeout) > 0;
}

ConnectionGate::ConnectionGate(ConnectionGateOptions options, SSL_CTX* tls,
                               InlineAnswer answer_inline, Serve serve)
    : options_(std::move(options)),
      tls_(tls),
      answer_inline_(std::move(answer_inline)),
      serve_(std::move(serve)) {}

ConnectionGate::~ConnectionGate() { Stop(); }

absl::Status ConnectionGate::Start() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    return absl::InternalError(absl::StrCat("cannot set up the HTTP gate: ", strerror(errno)));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event);
  {
    absl::MutexLock lock(&mu_);
    started_ = true;
  }
  gate_thread_ = std::thread([this] { GateThread(); });
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] { WorkerThread(); });
  }
  return absl::OkStatus();
}

void ConnectionGate::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void ConnectionGate::Add(int fd) {
  int port = 0;
  std::string peer = PeerOf(fd, &port);
  const int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  const int yes = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  auto connection = std::make_unique<GateConnection>(fd, std::move(peer), port);
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || stopping_) return;  // the connection's destructor closes it
    if (open_ >= 2 * options_.max_connections) {
      ++closed_unread_;
      DDP_LOG_EVERY_N_SEC(WARNING, 10)
          << "HTTP: " << open_ << " connections open, twice --http-max-connections ("
          << options_.max_connections << "): closing new ones unread";
      return;
    }
    ++open_;
    auto client = per_client_.find(connection->peer());
    const size_t from_client = client == per_client_.end() ? 0 : client->second;
    if (counted_ >= options_.max_connections) {
      connection->over_total_ = true;
    } else if (from_client < options_.max_connections_per_client) {
      connection->counted_ = true;
      ++counted_;
      ++per_client_[connection->peer()];
    }
    const absl::Time now = absl::Now();
    connection->head_deadline_ = now + options_.header_timeout;
    connection->idle_deadline_ = absl::InfiniteFuture();
    if (tls_ != nullptr) {
      connection->ssl_ = SSL_new(tls_);
      if (connection->ssl_ != nullptr) {
        SSL_set_fd(connection->ssl_, fd);
        SSL_set_accept_state(connection->ssl_);
        SSL_set_mode(connection->ssl_,
                     SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
      }
      connection->phase_ = GateConnection::Phase::kHandshake;
    }
    incoming_.push_back(std::move(connection));
  }
  Wake();
}

void ConnectionGate::Close(std::unique_ptr<GateConnection> connection) {
  {
    absl::MutexLock lock(&mu_);
    --open_;
    if (connection->counted_) {
      --counted_;
      auto client = per_client_.find(connection->peer());
      if (client != per_client_.end() && --client->second == 0) per_client_.erase(client);
    }
  }
  connection.reset();  // closes the socket
}

void ConnectionGate::ReplyAndClose(std::unique_ptr<GateConnection> connection,
                                   const GateReply& reply) {
  const std::string bytes = Render(reply);
  // Replies are small and the socket's buffer empty: no waiting.
  connection->Write(bytes.data(), bytes.size(), absl::ZeroDuration());
  shutdown(connection->fd(), SHUT_WR);
  Close(std::move(connection));
}

void ConnectionGate::Watch(std::unique_ptr<GateConnection> connection, uint32_t events) {
  const int fd = connection->fd();
  if (connection->events_ != events) {
    epoll_event event{};
    event.events = events;
    event.data.fd = fd;
    epoll_ctl(epoll_fd_, connection->events_ == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event);
    connection->events_ = events;
  }
  waiting_[fd] = std::move(connection);
}

void ConnectionGate::Unwatch(GateConnection& connection) {
  if (connection.events_ == 0) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, connection.fd(), nullptr);
  connection.events_ = 0;
}

void ConnectionGate::Progress(std::unique_ptr<GateConnection> connection) {
  if (connection->phase_ == GateConnection::Phase::kHandshake) {
    if (connection->ssl_ == nullptr) {
      Unwatch(*connection);
      return Close(std::move(connection));
    }
    const int done = SSL_do_handshake(connection->ssl_);
    if (done != 1) {
      const int error = SSL_get_error(connection->ssl_, done);
      if (error == SSL_ERROR_WANT_READ) return Watch(std::move(connection), EPOLLIN);
      if (error == SSL_ERROR_WANT_WRITE) return Watch(std::move(connection), EPOLLOUT);
      Unwatch(*connection);
      return Close(std::move(connection));  // not TLS, or a certificate refused
    }
    connection->phase_ = GateConnection::Phase::kHead;
  }
  bool want_write = false;
  const bool open = connection->ReadAvailable(options_.max_head_bytes + 1, &want_write);
  if (connection->buffered() > 0) connection->idle_deadline_ = absl::InfiniteFuture();
  if (HeadEnd(connection->unconsumed()) != absl::string_view::npos) {
    Unwatch(*connection);
    return Dispatch(std::move(connection));
  }
  if (!open) {
    Unwatch(*connection);
    return Close(std::move(connection));
  }
  if (connection->buffered() > options_.max_head_bytes) {
    Unwatch(*connection);
    return ReplyAndClose(
        std::move(connection),
        ErrorReply(431, 3,
                   absl::StrCat("the request head is over ", options_.max_head_bytes, " bytes")));
  }
  Watch(std::move(connection), want_write ? EPOLLOUT : EPOLLIN);
}

void ConnectionGate::Dispatch(std::unique_ptr<GateConnection> connection) {
  const auto [method, target] = RequestLine(connection->unconsumed());
  if (answer_inline_) {
    if (std::optional<GateReply> reply = answer_inline_(method, target)) {
      return ReplyAndClose(std::move(connection), *reply);
    }
  }
  if (!connection->counted_) {
    GateReply refusal =
        connection->over_total_
            ? ErrorReply(503, 14,
                         absl::StrCat("the coordinator serves ", options_.max_connections,
                                      " HTTP connections, its limit (--http-max-connections); "
                                      "retry later"))
            : ErrorReply(429, 8,
                         absl::StrCat("too many HTTP connections from ", connection->peer(),
                                      " (limit ", options_.max_connections_per_client,
                                      " per client address, --http-max-connections-per-client); "
                                      "close some or retry later"));
    {
      absl::MutexLock lock(&mu_);
      ++refused_over_cap_;
    }
    DDP_LOG_EVERY_N_SEC(WARNING, 10) << "HTTP: refused a request from " << connection->peer()
                                     << " over a connection cap: " << refusal.status;
    return ReplyAndClose(std::move(connection), refusal);
  }
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      ready_.push_back(std::move(connection));
      return;
    }
  }
  Close(std::move(connection));
}

void ConnectionGate::Expire(absl::Time now) {
  std::vector<int> late;
  for (const auto& [fd, connection] : waiting_) {
    if (now >= connection->idle_deadline_ || now >= connection->head_deadline_) {
      late.push_back(fd);
    }
  }
  for (int fd : late) {
    auto it = waiting_.find(fd);
    std::unique_ptr<GateConnection> connection = std::move(it->second);
    waiting_.erase(it);
    Unwatch(*connection);
    if (now >= connection->idle_deadline_) {
      Close(std::move(connection));  // an idle kept-alive connection
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      ++timed_out_;
    }
    if (connection->phase_ == GateConnection::Phase::kHandshake) {
      Close(std::move(connection));
      continue;
    }
    ReplyAndClose(std::move(connection),
                  ErrorReply(408, 4,
                             absl::StrCat("the request head did not arrive within ",
                                          absl::FormatDuration(options_.header_timeout))));
  }
}

void ConnectionGate::GateThread() {
  pthread_setname_np(pthread_self(), "http-gate");
  BlockSigpipe();
  std::vector<epoll_event> events(256);
  absl::Time next_expiry = absl::Now();
  while (true) {
    const int n =
        epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), kExpirySliceMs);
    std::vector<std::unique_ptr<GateConnection>> incoming;
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      stopping = stopping_;
      incoming.swap(incoming_);
    }
    if (stopping) {
      for (auto& connection : incoming) Close(std::move(connection));
      for (auto& [fd, connection] : waiting_) {
        Unwatch(*connection);
        Close(std::move(connection));
      }
      waiting_.clear();
      return;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t count = 0;
        (void)!read(wake_fd_, &count, sizeof(count));
        continue;
      }
      auto it = waiting_.find(fd);
      if (it == waiting_.end()) continue;
      std::unique_ptr<GateConnection> connection = std::move(it->second);
      waiting_.erase(it);
      Progress(std::move(connection));
    }
    // New connections, and kept-alive ones whose next request may already be
    // buffered (read ahead, or inside TLS).
    for (auto& connection : incoming) Progress(std::move(connection));
    const absl::Time now = absl::Now();
    if (now >= next_expiry) {
      Expire(now);
      next_expiry = now + absl::Milliseconds(kExpirySliceMs);
    }
  }
}

void ConnectionGate::WorkerThread() {
  pthread_setname_np(pthread_self(), "http-worker");
  BlockSigpipe();
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !ready_.empty(); };
  while (true) {
    std::unique_ptr<GateConnection> connection;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      connection = std::move(ready_.front());
      ready_.pop_front();
      serving_.insert(connection.get());
    }
    const bool last = ++connection->requests_ >= options_.keep_alive_max_count;
    bool keep = serve_(*connection, last) && !last;
    {
      absl::MutexLock lock(&mu_);
      serving_.erase(connection.get());
      keep = keep && !stopping_;
    }
    if (!keep) {
      Close(std::move(connection));
      continue;
    }
    const absl::Time now = absl::Now();
    connection->head_deadline_ = now + options_.header_timeout;
    connection->idle_deadline_ =
        connection->buffered() > 0 ? absl::InfiniteFuture() : now + options_.keep_alive_timeout;
    {
      absl::MutexLock lock(&mu_);
      incoming_.push_back(std::move(connection));
    }
    Wake();
  }
}

void ConnectionGate::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || stopping_) {
      stopping_ = true;
      return;
    }
    stopping_ = true;
    // Ends requests under way: their reads and writes fail at once. The gate
    // closes these sockets only after their worker returns.
    for (GateConnection* connection : serving_) shutdown(connection->fd(), SHUT_RDWR);
  }
  Wake();
  if (gate_thread_.joinable()) gate_thread_.join();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  std::deque<std::unique_ptr<GateConnection>> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(ready_);
  }
  for (auto& connection : left) Close(std::move(connection));
  close(epoll_fd_);
  close(wake_fd_);
}

ConnectionGate::Stats ConnectionGate::stats() const {
  absl::MutexLock lock(&mu_);
  return Stats{open_, refused_over_cap_, closed_unread_, timed_out_};
}

}  // namespace ddp::http
