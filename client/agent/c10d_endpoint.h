#ifndef DDP_CLIENT_AGENT_C10D_ENDPOINT_H_
#define DDP_CLIENT_AGENT_C10D_ENDPOINT_H_

// torchrun's usual multi-node form, the same command on every node with
// nothing started beforehand:
//
//   ddp-client --rdzv-backend c10d --rdzv-endpoint HEAD:29400 --nnodes 2 ...
//
// torchrun's agent on HEAD hosts the TCPStore. Here the agent whose machine is
// HEAD starts a coordinator serving HEAD's port on every interface (a child
// process that dies with the agent, state in a temporary directory), unless a
// coordinator already answers there (a standalone one, or another agent on
// the same host that won the port). Agents elsewhere connect and retry until
// it serves (--connect-timeout).
//
// Thread-safety: call from the main thread, before the session starts.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/agent/standalone_coordinator.h"

namespace ddp::client {

// True when something accepts TCP connections at `endpoint` ("host:port")
// within `timeout`.
bool EndpointAnswers(const std::string& endpoint, absl::Duration timeout);

// True when `host` names an address of this machine (it can be bound).
bool IsLocalHost(const std::string& host);

// Serves `endpoint` in-process when nothing answers there and its host is this
// machine. Returns the coordinator it started, or null when another one
// answers (or won the port) or the host is another machine.
// Possible errors: those of StandaloneCoordinator::Start other than
// ALREADY_EXISTS, and INVALID_ARGUMENT for an endpoint without a port.
// `form` names the command-line form in log lines ("--rdzv-backend c10d").
absl::StatusOr<std::unique_ptr<StandaloneCoordinator>> ServeC10dEndpointIfHere(
    const std::string& endpoint, const std::string& form);

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_C10D_ENDPOINT_H_
