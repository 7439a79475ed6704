#ifndef DDP_COORDINATOR_SERVER_CONNECTION_GUARD_H_
#define DDP_COORDINATOR_SERVER_CONNECTION_GUARD_H_

// Keeps the coordinator's listeners alive when descriptors run out.
//
// gRPC 1.51's listener stops accepting for good after one accept4() fails with
// EMFILE (src/core/lib/iomgr/tcp_server_posix.cc: "Failed accept4", then the
// listener is dropped): a flood of connections that exhausts the descriptor
// limit would leave the coordinator deaf until restarted. The guard sits in
// front of every accept4() of this process (the symbol is interposed: this
// binary's definition wins over libc's for libgrpc's calls):
//   - a connection whose descriptor number lands in the reserve (the lowest
//     free descriptor is always returned, so its number tells how many are in
//     use) is closed at once: the excess is refused cleanly, and the last
//     `reserve` descriptors stay free for the database, the WAL and pipes;
//   - on EMFILE/ENFILE a spare descriptor is released, the pending connection
//     accepted and closed, and the spare taken again, until the backlog is
//     empty;
//   - either way gRPC sees EAGAIN, which keeps its listener armed, so new
//     connections are accepted again as soon as descriptors free up.
// It also raises the soft RLIMIT_NOFILE to the hard limit at install time.
//
// Thread-safety: Install once before serving; the accept path is lock-free.

#include <cstdint>

namespace ddp::server {

struct ConnectionGuardOptions {
  // Descriptors kept free for everything that is not a connection.
  int64_t reserve = 64;
};

struct ConnectionCapacity {
  int64_t fd_limit = 0;         // soft RLIMIT_NOFILE after raising it
  int64_t max_connections = 0;  // fd_limit - reserve (minus what is open)
};

// Raises the descriptor limit and turns the guard on. Idempotent.
ConnectionCapacity InstallConnectionGuard(const ConnectionGuardOptions& options);

// Connections refused so far (over capacity, or while out of descriptors).
int64_t RefusedConnections();

// Whether the shared libraries' accept4 calls (libgrpc's) resolve to the guard:
// the process's global symbol lookup finds this binary's accept4 first. False
// if the symbol was not exported (e.g. a build that hides it).
bool ConnectionGuardActive();

}  // namespace ddp::server

#endif  // DDP_COORDINATOR_SERVER_CONNECTION_GUARD_H_
