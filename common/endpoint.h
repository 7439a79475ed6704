#ifndef DDP_COMMON_ENDPOINT_H_
#define DDP_COMMON_ENDPOINT_H_

// The one check of a HOST:PORT endpoint given on a command line or in the
// environment (ddp-client's --coordinator / --rdzv-endpoint, ddpctl's
// --coordinator, $DDP_COORDINATOR): gRPC would otherwise dial something else
// silently (port 99999 wraps around).

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ddp {

// OK for "host:port" or "[ipv6]:port" with a port in [1, 65535] and a host of 1
// to 255 characters without spaces. INVALID_ARGUMENT otherwise, naming `what`
// (e.g. "--coordinator") and the value (capped).
absl::Status ValidateEndpoint(absl::string_view what, absl::string_view value);

}  // namespace ddp

#endif  // DDP_COMMON_ENDPOINT_H_
