#ifndef DDP_TOOLS_DDPCTL_GRPC_COMMANDS_H_
#define DDP_TOOLS_DDPCTL_GRPC_COMMANDS_H_

// The thin gRPC layer of ddpctl: runs one parsed Invocation against the
// coordinator's KeyValueService or JobService and prints the result.
//
// Exit codes (see command_line.h): kExitOk; kExitUnavailable when the
// coordinator is not answering or says UNAVAILABLE; kExitUsage for a local
// argument error (e.g. DELTA not a number); kExitError for everything else,
// including the server's INVALID_ARGUMENT.
// Errors print one line on `err`: "ddpctl: <command>: <CODE>: <message>".
//
// Streaming commands (kv watch, lease keepalive, jobs watch) run until `stop`
// is notified (main notifies it on SIGINT/SIGTERM). Thread-safety: one call at
// a time.

#include <ostream>

#include "absl/synchronization/notification.h"
#include "tools/ddpctl/command_line.h"

namespace ddp::ddpctl {

int RunInvocation(const Invocation& invocation, absl::Notification& stop, std::ostream& out,
                  std::ostream& err);

}  // namespace ddp::ddpctl

#endif  // DDP_TOOLS_DDPCTL_GRPC_COMMANDS_H_
