#include "coordinator/http/health.h"

#include <string>
#include <utility>

#include "httplib.h"

namespace ddp::http {
namespace {

GateReply Liveness() { return GateReply{200, "text/plain", "ok\n"}; }

GateReply ReadinessReply(const absl::Status& status) {
  if (status.ok()) return GateReply{200, "text/plain", "ready\n"};
  return GateReply{503, "text/plain", std::string(status.message()) + "\n"};
}

void Reply(const GateReply& reply, httplib::Response& response) {
  response.status = reply.status;
  response.set_content(reply.body, reply.content_type.c_str());
}

}  // namespace

void InstallHealthChecks(httplib::Server& server, std::function<absl::Status()> readiness) {
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& response) {
    Reply(Liveness(), response);
  });
  server.Get("/readyz", [readiness = std::move(readiness)](const httplib::Request&,
                                                           httplib::Response& response) {
    Reply(ReadinessReply(readiness()), response);
  });
}

std::optional<GateReply> AnswerHealthProbe(absl::string_view method, absl::string_view target,
                                           const std::function<absl::Status()>& readiness) {
  if (method != "GET") return std::nullopt;
  const absl::string_view path = target.substr(0, target.find('?'));
  if (path == "/healthz") return Liveness();
  if (path == "/readyz") return ReadinessReply(readiness());
  return std::nullopt;
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
