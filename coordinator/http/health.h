#ifndef DDP_COORDINATOR_HTTP_HEALTH_H_
#define DDP_COORDINATOR_HTTP_HEALTH_H_

// Kubernetes-style probes: GET /healthz answers 200 "ok" while the process
// serves HTTP (liveness); GET /readyz answers 200 "ready" when `readiness`
// returns OK (the store is loaded and accepts writes), else 503 with the
// reason (readiness: send no traffic here).

#include <functional>

#include "absl/status/status.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace ddp::http {

void InstallHealthChecks(httplib::Server& server, std::function<absl::Status()> readiness);

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_HEALTH_H_
