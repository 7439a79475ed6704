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

void InstallMetricsEndpoint(httplib::Server& server, std::function<std::string()> scrape) {
  server.Get("/metrics",
             [scrape = std::move(scrape)](const httplib::Request&, httplib::Response& response) {
               response.set_content(scrape(), "text/plain; version=0.0.4; charset=utf-8");
             });
}

}  // namespace ddp::http
