#include "tests/hardening/http_coordinator.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/time.h"
#include "tests/crash/job_history_probe.h"

namespace ddp::testing {
namespace {

std::string HttpPortFile(const CoordinatorProcessOptions& options) {
  return options.work_dir + "/http.port";
}

}  // namespace

CoordinatorProcessOptions HttpCoordinatorOptions() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  CoordinatorProcessOptions options;
  options.binary = CoordinatorBinaryFromRunfiles();
  options.work_dir = tmp != nullptr ? tmp : "/tmp";
  options.data_dir = options.work_dir + "/data";
  options.extra_args = {"--http-port-file", HttpPortFile(options)};
  return options;
}

absl::StatusOr<int> StartWithHttp(CoordinatorProcess& coordinator,
                                  const CoordinatorProcessOptions& options) {
  std::remove(HttpPortFile(options).c_str());
  if (absl::Status started = coordinator.Start(); !started.ok()) return started;
  return ReadPortFile(HttpPortFile(options), absl::Seconds(10));
}

}  // namespace ddp::testing
