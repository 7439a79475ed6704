#include "client/agent/node_health_checks.h"

#include "absl/time/time.h"
#include "common/logging.h"

namespace ddp::client {

HealthCheckEnvironment NodeHealthCheckEnvironment(const LaunchOptions& launch,
                                                  const std::string& run_dir,
                                                  const std::string& cuda_visible_devices) {
  HealthCheckEnvironment env;
  env.log_dir = run_dir;
  env.cuda_visible_devices = cuda_visible_devices;
  if (launch.nproc_per_node_spec == "gpu") env.announced_gpus = launch.nproc_per_node;
  env.python = launch.python_exec;
  return env;
}

std::vector<v1::HealthCheckResult> RunNodeHealthChecks(const LaunchOptions& launch,
                                                       const HealthCheckEnvironment& env,
                                                       const std::string& when,
                                                       const Clock& clock) {
  std::vector<v1::HealthCheckResult> results;
  for (const HealthCheckSpec& spec : launch.health_checks) {
    const HealthCheckOutcome outcome = RunHealthCheck(spec, env, clock);
    if (outcome.passed) {
      DDP_LOG(INFO) << "health check '" << outcome.name << "' " << when << " passed in "
                    << absl::FormatDuration(outcome.took);
    } else {
      DDP_LOG(ERROR) << "health check '" << outcome.name << "' " << when << " FAILED in "
                     << absl::FormatDuration(outcome.took) << ": " << outcome.output;
    }
    v1::HealthCheckResult& result = results.emplace_back();
    result.set_name(outcome.name);
    result.set_passed(outcome.passed);
    result.set_output(outcome.output);
    result.set_duration_ms(absl::ToInt64Milliseconds(outcome.took));
    result.set_time_unix_ms(absl::ToUnixMillis(clock.Now()));
  }
  return results;
}

const v1::HealthCheckResult* FirstFailedCheck(const std::vector<v1::HealthCheckResult>& results) {
  for (const v1::HealthCheckResult& result : results) {
    if (!result.passed()) return &result;
  }
  return nullptr;
}

}  // namespace ddp::client
