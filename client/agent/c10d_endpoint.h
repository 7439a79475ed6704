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

// Whether what accepts TCP at `endpoint` answers the coordinator's gRPC API
// (plaintext) within `timeout`: any answer of JobService counts (NOT_FOUND,
// UNAUTHENTICATED, ...); an HTTP/1 server, a silent listener or another gRPC
// service does not.
bool SpeaksCoordinatorApi(const std::string& endpoint, absl::Duration timeout);

// Serves `endpoint` (a child running this binary: StandaloneCoordinator) when nothing answers there
// and its host is this machine. Returns the coordinator it started, or null when another one
// answers (or won the port) or the host is another machine. With
// `plaintext` (no TLS configured), something that accepts connections there
// but does not speak the coordinator's API is an error at once, rather than a
// minute of retries (a port taken by another program).
// Possible errors: those of StandaloneCoordinator::Start other than
// ALREADY_EXISTS, INVALID_ARGUMENT for an endpoint without a port, and
// FAILED_PRECONDITION for a port taken by something that is not a coordinator.
// `form` names the command-line form in log lines ("--rdzv-backend c10d").
// `served` gives the served coordinator's log settings (its bind and port are
// the endpoint's).
absl::StatusOr<std::unique_ptr<StandaloneCoordinator>> ServeC10dEndpointIfHere(
    const std::string& endpoint, const std::string& form, bool plaintext = true,
    StandaloneCoordinatorOptions served = {});

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_C10D_ENDPOINT_H_
