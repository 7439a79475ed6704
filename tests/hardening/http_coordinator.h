#ifndef DDP_TESTS_HARDENING_HTTP_COORDINATOR_H_
#define DDP_TESTS_HARDENING_HTTP_COORDINATOR_H_

// The real coordinator the hardening tests run: //coordinator from the
// runfiles (tests/crash/coordinator_process.h) on $TEST_TMPDIR/data, with its
// HTTP listener on any free port.

#include "absl/status/statusor.h"
#include "tests/crash/coordinator_process.h"

namespace ddp::testing {

// Options with the binary, $TEST_TMPDIR/data and --http-port-file set; a
// test adds its own flags to extra_args.
CoordinatorProcessOptions HttpCoordinatorOptions();

// Starts `coordinator` (made with `options`) and returns its HTTP port,
// read from the port file (one left by an earlier start is removed first).
absl::StatusOr<int> StartWithHttp(CoordinatorProcess& coordinator,
                                  const CoordinatorProcessOptions& options);

}  // namespace ddp::testing

#endif  // DDP_TESTS_HARDENING_HTTP_COORDINATOR_H_
