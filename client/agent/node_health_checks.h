#ifndef DDP_CLIENT_AGENT_NODE_HEALTH_CHECKS_H_
#define DDP_CLIENT_AGENT_NODE_HEALTH_CHECKS_H_

// The agent's --health-check runs (client/health_check.h), as the session
// sends them: before the Register (their results go with it), and between
// generations, after a restart stopped the workers and before the node
// confirms it (WorkersStopped; a failure goes with a Leave instead). One place
// builds what the built-ins look at from the agent's flags, runs the checks in
// order, logs each, and makes the results the coordinator stores.
//
// Thread-safety: pure functions, except RunNodeHealthChecks, which blocks for
// as long as the checks take (each bounded by its timeout).

#include <string>
#include <vector>

#include "client/health_check.h"
#include "client/launch_options.h"
#include "common/clock.h"
#include "ddp/v1/nodes.pb.h"

namespace ddp::client {

// What the built-ins look at: the log dir `run_dir` (disk), the GPUs the node
// announces (`cuda_visible_devices`, the agent's CUDA_VISIBLE_DEVICES, else
// --nproc-per-node gpu), the workers' interpreter (gloo).
HealthCheckEnvironment NodeHealthCheckEnvironment(const LaunchOptions& launch,
                                                  const std::string& run_dir,
                                                  const std::string& cuda_visible_devices);

// Runs launch.health_checks in order and logs each ("passed in 1.2s", or
// "FAILED ...: OUTPUT"); `when` says when for the log ("before joining").
// Returns one result per check, timed on `clock`.
std::vector<v1::HealthCheckResult> RunNodeHealthChecks(const LaunchOptions& launch,
                                                       const HealthCheckEnvironment& env,
                                                       const std::string& when, const Clock& clock);

// The first failed result; null when all passed.
const v1::HealthCheckResult* FirstFailedCheck(const std::vector<v1::HealthCheckResult>& results);

}  // namespace ddp::client

#endif  // DDP_CLIENT_AGENT_NODE_HEALTH_CHECKS_H_
