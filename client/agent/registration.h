#ifndef DDP_CLIENT_AGENT_REGISTRATION_H_
#define DDP_CLIENT_AGENT_REGISTRATION_H_

// The Register message of an agent, from its flags: identity, process count,
// rank wish, address, and the job settings it would create the job with.
// Every node of a job must send the same settings (the coordinator refuses
// contradicting ones), so the defaults here are fixed values, not 0.
//
// Thread-safety: pure functions.

#include <string>

#include "absl/time/time.h"
#include "client/launch_options.h"
#include "ddp/v1/session.pb.h"

namespace ddp::client {

// Job timeouts used when --rdzv-conf does not set them.
struct RegistrationDefaults {
  absl::Duration join_timeout = absl::Seconds(600);
  absl::Duration last_call_timeout = absl::Seconds(30);
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  absl::Duration heartbeat_timeout = absl::Seconds(3);  // a dead node is seen within 3 s
};

// How other nodes reach this node (its MASTER_ADDR when it holds group rank 0):
// --local-addr, else `hostname` (torchrun advertises the host's name too), else
// 127.0.0.1. Never the node id: --node-id is a label that need not resolve.
std::string AdvertisedAddress(const LaunchOptions& options, const std::string& hostname);

// `address`: how other nodes reach this one (MASTER_ADDR when group rank 0).
v1::Register BuildRegistration(const LaunchOptions& options, const std::string& address,
                               const RegistrationDefaults& defaults = {});

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_REGISTRATION_H_
