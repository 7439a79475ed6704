#ifndef DDP_COMMON_EXIT_CODES_H_
#define DDP_COMMON_EXIT_CODES_H_

// Exit codes of the coordinator binary (docs/operations.md lists them). Scripts
// and supervisors (systemd's RestartPreventExitStatus, Kubernetes) can tell a
// condition worth restarting for (1) from one a restart cannot fix (2, 3, 4).

#include "absl/status/status.h"

namespace ddp {

inline constexpr int kExitOk = 0;
// A runtime failure: data dir locked by another coordinator, I/O errors, ...
inline constexpr int kExitFailure = 1;
// Bad command line: unknown flag or invalid value.
inline constexpr int kExitBadFlags = 2;
// The data dir's contents are missing, foreign or corrupt: refuse to start
// rather than serve an empty or wrong store. Needs an operator.
inline constexpr int kExitDataError = 3;
// The address (port) to listen on is taken, e.g. by another coordinator.
inline constexpr int kExitAddressInUse = 4;
// A coordinator that led lost the leadership (its etcd lease ran out, or a
// transaction found another leader): it stopped serving at once; its
// supervisor starts it again as a standby.
inline constexpr int kExitLostLeadership = 5;

// The exit code for a start-up failure: DATA_LOSS -> kExitDataError,
// ALREADY_EXISTS (the listen address is in use) -> kExitAddressInUse, any other
// error -> kExitFailure.
inline int ExitCodeForStartError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kDataLoss:
      return kExitDataError;
    case absl::StatusCode::kAlreadyExists:
      return kExitAddressInUse;
    default:
      return kExitFailure;
  }
}

}  // namespace ddp

#endif  // DDP_COMMON_EXIT_CODES_H_
