#ifndef DDP_CLIENT_ENTRY_POINT_CHECK_H_
#define DDP_CLIENT_ENTRY_POINT_CHECK_H_

// Before a node joins a job: can its workers start at all? A missing training
// script or module, a --no-python entry point that is not executable, a script
// that does not compile, or an interpreter that cannot find the script's first
// import (torch, usually) fails the same way in every generation, within
// milliseconds: found here, once, it costs no generation and none of the
// restart budget, and the user reads one line that says what to fix.
//
// Python entry points are examined by the workers' own interpreter
// (LaunchOptions::python_exec) in a short child process: it parses the script
// (ast, no code runs) and looks its first top-level import up with
// importlib.util.find_spec (nothing is imported but the parents of a dotted
// name). The check never refuses on doubt: when the probe itself cannot run or
// answer in time, it logs a warning and lets the node join.
//
// Thread-safety: the function is reentrant.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/launch_options.h"

namespace ddp::client {

struct EntryPointCheckOptions {
  // The probe's environment; empty: this process's (the workers' base
  // environment).
  std::vector<std::string> env;
  // Longer than this, the probe is abandoned (killed) and the node joins.
  absl::Duration probe_timeout = absl::Seconds(30);
};

// OK when the entry point can start, or when the check could not tell.
// Possible errors: FAILED_PRECONDITION with one line naming the entry point,
// what is wrong and what to do.
absl::Status CheckEntryPoint(const LaunchOptions& launch, const EntryPointCheckOptions& options);

}  // namespace ddp::client

#endif  // DDP_CLIENT_ENTRY_POINT_CHECK_H_
