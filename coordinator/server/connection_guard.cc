#include "coordinator/server/connection_guard.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "common/logging.h"
#include "common/proc_stats.h"

namespace ddp::server {
namespace {

using Accept4Fn = int (*)(int, sockaddr*, socklen_t*, int);

std::atomic<bool> g_installed{false};
std::atomic<int64_t> g_first_reserved_fd{INT64_MAX};
std::atomic<int64_t> g_refused{0};
std::atomic<int> g_spare_fd{-1};

Accept4Fn RealAccept4() {
  static const Accept4Fn real = reinterpret_cast<Accept4Fn>(dlsym(RTLD_NEXT, "accept4"));
  return real;
}

void Refused(const char* why) {
  const int64_t refused = g_refused.fetch_add(1, std::memory_order_relaxed) + 1;
  DDP_LOG_EVERY_N_SEC(WARNING, 10)
      << "refusing connections (" << why << "; " << refused
      << " refused so far): raise the descriptor limit (ulimit -n) or reduce the clients";
}

// Accepts and closes what is pending, so that clients are refused at once
// rather than left waiting in the backlog. Uses the spare descriptor when none
// is free.
void DrainBacklog(int listener, const char* why) {
  Accept4Fn real = RealAccept4();
  for (int i = 0; i < 100000; ++i) {
    int fd = real(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
      const int spare = g_spare_fd.exchange(-1);
      if (spare < 0) return;
      close(spare);
      fd = real(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      g_spare_fd.store(open("/dev/null", O_RDONLY | O_CLOEXEC));
    }
    if (fd < 0) return;  // EAGAIN: the backlog is empty
    close(fd);
    Refused(why);
  }
}

}  // namespace

ConnectionCapacity InstallConnectionGuard(const ConnectionGuardOptions& options) {
  ConnectionCapacity capacity;
  capacity.fd_limit = RaiseOpenFileLimit();
  const int64_t first_reserved = capacity.fd_limit - options.reserve;
  capacity.max_connections = first_reserved > 0 ? first_reserved : 0;
  g_first_reserved_fd.store(first_reserved > 16 ? first_reserved : 16);
  if (g_spare_fd.load() < 0) g_spare_fd.store(open("/dev/null", O_RDONLY | O_CLOEXEC));
  g_installed.store(true);
  return capacity;
}

int64_t RefusedConnections() { return g_refused.load(std::memory_order_relaxed); }

bool ConnectionGuardActive() {
  // What a shared library's call binds to: the first definition in the
  // global lookup scope (the executable, when it exports the symbol).
  return dlsym(RTLD_DEFAULT, "accept4") == reinterpret_cast<void*>(&::accept4);
}

}  // namespace ddp::server

// The interposed accept4 (see the header). Outside the namespace: it replaces
// libc's for every caller in the process, libgrpc included.
extern "C" int accept4(int listener, sockaddr* address, socklen_t* length, int flags) {
  using ddp::server::RealAccept4;
  const int fd = RealAccept4()(listener, address, length, flags);
  if (!ddp::server::g_installed.load(std::memory_order_relaxed)) return fd;
  if (fd >= 0) {
    if (fd < ddp::server::g_first_reserved_fd.load(std::memory_order_relaxed)) return fd;
    close(fd);
    ddp::server::Refused("over capacity: the descriptor limit is nearly reached");
    ddp::server::DrainBacklog(listener, "over capacity");
    errno = EAGAIN;
    return -1;
  }
  if (errno == EMFILE || errno == ENFILE) {
    ddp::server::DrainBacklog(listener, "out of descriptors");
    errno = EAGAIN;
    return -1;
  }
  return fd;
}
