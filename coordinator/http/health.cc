#include "coordinator/http/health.h"

#include <string>
#include <utility>

#include "httplib.h"

namespace ddp::http {

void InstallHealthChecks(httplib::Server& server, std::function<absl::Status()> readiness) {
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("ok\n", "text/plain");
  });
  server.Get("/readyz", [readiness = std::move(readiness)](const httplib::Request&,
                                                           httplib::Response& response) {
    const absl::Status status = readiness();
    if (status.ok()) {
      response.set_content("ready\n", "text/plain");
      return;
    }
    response.status = 503;
    response.set_content(std::string(status.message()) + "\n", "text/plain");
  });
}

void InstallMetricsEndpoint(httplib::Server& server, std::function<std::string()> scrape,
                            std::function<absl::Status(const std::string&)> authorize) {
  server.Get("/metrics", [scrape = std::move(scrape), authorize = std::move(authorize)](
                             const httplib::Request& request, httplib::Response& response) {
    if (authorize) {
      const absl::Status allowed = authorize(request.get_header_value("Authorization"));
      if (!allowed.ok()) {
        response.status = absl::IsUnauthenticated(allowed) ? 401 : 403;
        response.set_content(std::string(allowed.message()) + "\n", "text/plain");
        return;
      }
    }
    response.set_content(scrape(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

}  // namespace ddp::http
