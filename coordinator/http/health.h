#ifndef DDP_COORDINATOR_HTTP_HEALTH_H_
#define DDP_COORDINATOR_HTTP_HEALTH_H_

// Operator endpoints of the HTTP listener. Kubernetes-style probes: GET /healthz answers 200 "ok"
// while the process serves HTTP (liveness); GET /readyz answers 200 "ready" when `readiness`
// returns OK (the store is loaded and commits succeed), else 503 with the
// reason (readiness: send no traffic here).
//
// The listener's gate answers both itself (AnswerHealthProbe as the
// listener's answer_inline), before any worker and whatever the load;
// InstallHealthChecks serves the same replies on httplib's routes.

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "coordinator/http/connection_gate.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace ddp::http {

void InstallHealthChecks(httplib::Server& server, std::function<absl::Status()> readiness);

// The reply to GET /healthz or /readyz (a query is ignored); nullopt for any
// other request. `readiness` must be quick: the gate thread calls it.
std::optional<GateReply> AnswerHealthProbe(absl::string_view method, absl::string_view target,
                                           const std::function<absl::Status()>& readiness);

// GET /metrics: `scrape()` in Prometheus' text exposition format 0.0.4.
// `authorize` (may be null) gets the request's Authorization header value
// and refuses with UNAUTHENTICATED (401) or PERMISSION_DENIED (403).
void InstallMetricsEndpoint(httplib::Server& server, std::function<std::string()> scrape,
                            std::function<absl::Status(const std::string&)> authorize = nullptr);

}  // namespace ddp::http

#endif  // DDP_COORDINATOR_HTTP_HEALTH_H_
