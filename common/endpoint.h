#ifndef DDP_COMMON_ENDPOINT_H_
#define DDP_COMMON_ENDPOINT_H_

// The one check of a HOST:PORT endpoint (or a comma-separated list of them) given on a command line
// or in the environment (ddp-client's --coordinator / --rdzv-endpoint, ddpctl's
// --coordinator, $DDP_COORDINATOR): gRPC would otherwise dial something else
// silently (port 99999 wraps around).

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddp {

// OK for "host:port" or "[ipv6]:port" with a port in [1, 65535] and a host of 1
// to 255 characters without spaces. INVALID_ARGUMENT otherwise, naming `what`
// (e.g. "--coordinator") and the value (capped).
absl::Status ValidateEndpoint(absl::string_view what, absl::string_view value);

// The host of "host:port" or "[ipv6]:port", without brackets ("" when there
// is no colon, or nothing before it). The endpoint is not checked (see
// ValidateEndpoint).
std::string EndpointHost(absl::string_view endpoint);

// The most coordinators a list may name.
inline constexpr size_t kMaxEndpoints = 16;

// "HOST:PORT[,HOST:PORT...]": the coordinators of an HA deployment (any of
// them will do: a standby names the leader). Each entry is checked as
// ValidateEndpoint does; INVALID_ARGUMENT names `what`, the bad entry, or the
// count over kMaxEndpoints.
absl::StatusOr<std::vector<std::string>> ParseEndpointList(absl::string_view what,
                                                           absl::string_view value);

// The coordinator's gRPC port when an address names none (torchrun's
// --rdzv-endpoint default).
inline constexpr int kDefaultCoordinatorPort = 29400;

// The one reading of a --coordinator / --rdzv-endpoint / $DDP_COORDINATOR
// value, in ddpctl and ddp-client alike: a comma-separated list (HA) whose
// entries are HOST, HOST:PORT, [IPV6] or [IPV6]:PORT, each optionally
// prefixed "grpc://" or "http://" (as etcdctl's endpoints; a trailing "/" is
// dropped). A missing port is kDefaultCoordinatorPort. Returns the entries as
// HOST:PORT, checked as ParseEndpointList does. INVALID_ARGUMENT names `what`
// and the entry: another scheme ("https://": TLS comes from --tls-ca, not the
// address), an empty entry, a bad port, more than kMaxEndpoints.
absl::StatusOr<std::vector<std::string>> ParseCoordinatorList(absl::string_view what,
                                                              absl::string_view value);

}  // namespace ddp

#endif  // DDP_COMMON_ENDPOINT_H_
