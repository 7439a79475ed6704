#ifndef DDP_CLIENT_FREE_PORT_H_
#define DDP_CLIENT_FREE_PORT_H_

// Picks a TCP port that is free on this host now, for MASTER_PORT.
//
// The race: the port is free when checked, but it is only used later, when rank
// 0's TCPStore binds it; anything may take it in between. Mitigations:
//  1. Ports are first drawn at random BELOW the kernel's ephemeral range
//     (/proc/sys/net/ipv4/ip_local_port_range, from `range_low`), where
//     outgoing connections (which get their local ports from that range) never
//     land; only when `attempts` random tries are all busy does it fall back to
//     bind(port 0), which the kernel picks from the ephemeral range.
//  2. The port is fresh per generation and used within seconds; a rank 0 that
//  fails to bind
//     fails the generation, and the restart gets another port.
//  The socket is bound with SO_REUSEADDR unset, so a port in TIME_WAIT is not
//  handed out.
//
// Thread-safety: thread-safe.

#include <string>

#include "absl/status/statusor.h"

namespace ddp::client {

struct FreePortOptions {
  std::string bind_address = "0.0.0.0";  // IPv4 or IPv6 literal; the training interface
  int range_low = 20000;                 // lowest port tried at random
  int attempts = 16;                     // random tries before bind(0)
};

// Possible errors: INVALID_ARGUMENT (bind_address is not an IP literal),
// UNAVAILABLE (no port could be bound; errno text named).
absl::StatusOr<int> PickFreePort(const FreePortOptions& options = {});

// True when `port` can be bound on `bind_address` right now.
bool PortIsFree(const std::string& bind_address, int port);

}  // namespace ddp::client

#endif  // DDP_CLIENT_FREE_PORT_H_
