#include "tests/e2e/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ddp::testing {
namespace {

int ConnectTo(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// One proxied connection: two sockets and the bytes read but not yet written.
struct Pair {
  int fd[2];
  std::string pending[2];  // pending[i]: read from fd[i], to be written to fd[1 - i]
  bool closed = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(int target_port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 64) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    return absl::InternalError(absl::StrCat("proxy listen: ", error));
  }
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return std::unique_ptr<TcpProxy>(new TcpProxy(fd, ntohs(address.sin_port), target_port));
}

TcpProxy::TcpProxy(int listen_fd, int port, int target_port)
    : listen_fd_(listen_fd), port_(port), target_port_(target_port) {
  thread_ = std::thread([this] { Loop(); });
}

TcpProxy::~TcpProxy() {
  quit_ = true;
  thread_.join();
  close(listen_fd_);
}

std::string TcpProxy::address() const { return absl::StrCat("127.0.0.1:", port_); }

void TcpProxy::Loop() {
  std::vector<std::unique_ptr<Pair>> pairs;
  char buffer[64 << 10];
  while (!quit_) {
    if (partitioned_) {  // silence: nothing read, written, accepted or closed
      usleep(10'000);
      continue;
    }
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
    for (const auto& p : pairs) {
      for (int i = 0; i < 2; ++i) {
        short events = POLLIN;
        if (!p->pending[1 - i].empty()) events |= POLLOUT;
        fds.push_back({p->fd[i], events, 0});
      }
    }
    if (poll(fds.data(), fds.size(), 10) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        const int server = ConnectTo(target_port_);
        if (server < 0) {
          close(client);
        } else {
          const int one = 1;
          setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          for (int fd : {client, server}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
          pairs.push_back(std::make_unique<Pair>(Pair{{client, server}, {}, false}));
        }
      }
    }
    for (size_t k = 0; k < pairs.size() && 1 + 2 * k < fds.size(); ++k) {
      Pair& p = *pairs[k];
      for (int i = 0; i < 2 && !p.closed; ++i) {
        const pollfd& f = fds[1 + 2 * k + i];
        if (f.revents & POLLOUT) {
          std::string& out = p.pending[1 - i];
          const ssize_t n = write(p.fd[i], out.data(), out.size());
          if (n > 0) out.erase(0, static_cast<size_t>(n));
          if (n < 0 && errno != EAGAIN && errno != EINTR) p.closed = true;
        }
        if (f.revents & (POLLIN | POLLHUP | POLLERR)) {
          const ssize_t n = read(p.fd[i], buffer, sizeof(buffer));
          if (n > 0) {
            p.pending[i].append(buffer, static_cast<size_t>(n));
          } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            p.closed = true;
          }
        }
      }
    }
    for (auto it = pairs.begin(); it != pairs.end();) {
      if ((*it)->closed) {
        close((*it)->fd[0]);
        close((*it)->fd[1]);
        it = pairs.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& p : pairs) {
    close(p->fd[0]);
    close(p->fd[1]);
  }
}

}  // namespace ddp::testing
