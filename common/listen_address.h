#ifndef DDP_COMMON_LISTEN_ADDRESS_H_
#define DDP_COMMON_LISTEN_ADDRESS_H_

// Tells why a listener could not bind: gRPC's ServerBuilder only says it
// failed. Shared by every listener of the coordinator.

#include <string>

#include "absl/status/status.h"

namespace ddp {

// Binds (and closes) a TCP socket on host:port the way a server would
// (SO_REUSEADDR, no SO_REUSEPORT). `host` is a numeric address or a name;
// IPv6 may be bracketed ("[::]"). `what` names the listener in messages
// ("gRPC", "HTTP"), `flag` the flag that picks the port.
// Returns OK when the bind succeeds; ALREADY_EXISTS when the address is in use
// (another coordinator?); UNAVAILABLE for other errors (address not local,
// permission), each with a message naming the address and what to do.
// `transport` picks TCP (a listener) or UDP (a datagram socket, e.g. the
// heartbeat port).
enum class ListenTransport { kTcp, kUdp };
absl::Status DiagnoseListen(const std::string& host, int port, const std::string& what,
                            const std::string& flag,
                            ListenTransport transport = ListenTransport::kTcp);

}  // namespace ddp

#endif  // DDP_COMMON_LISTEN_ADDRESS_H_
