// `nodes list` and `nodes get` as text.

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "tools/ddpctl/output.h"

namespace ddp::ddpctl {
namespace {

std::string When(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

std::string IncidentKindName(v1::NodeIncidentKind kind) {
  switch (kind) {
    case v1::NODE_INCIDENT_WORKER_FAILED:
      return "worker failed";
    case v1::NODE_INCIDENT_HANG:
      return "hang";
    case v1::NODE_INCIDENT_LEASE_LOST:
      return "lease lost";
    case v1::NODE_INCIDENT_CHECK_FAILED:
      return "check failed";
    default:
      return "unknown";
  }
}

}  // namespace

std::string NodeStateText(v1::NodeState state) {
  switch (state) {
    case v1::NODE_READY:
      return "READY";
    case v1::NODE_CORDONED:
      return "CORDONED";
    case v1::NODE_QUARANTINED:
      return "QUARANTINED";
    default:
      return "UNKNOWN";
  }
}

std::string NodeListText(const std::vector<v1::Node>& nodes) {
  constexpr char kRow[] = "%-24s %-12s %-9s %-20s %-20s %s\n";
  std::string text = absl::StrFormat(kRow, "NODE", "STATE", "INCIDENTS", "LAST JOB", "LAST SEEN",
                                     "CHECKS FAILING");
  for (const v1::Node& node : nodes) {
    std::string failing;
    for (const v1::HealthCheckResult& check : node.checks()) {
      if (!check.passed()) absl::StrAppend(&failing, failing.empty() ? "" : ",", check.name());
    }
    absl::StrAppendFormat(&text, kRow, PrintableBytes(node.node_id()), NodeStateText(node.state()),
                          absl::StrCat(node.incident_count()),
                          node.last_job_id().empty() ? "-" : PrintableBytes(node.last_job_id()),
                          When(node.last_seen_unix_ms()), failing.empty() ? "-" : failing);
  }
  return text;
}

std::string NodeText(const v1::Node& node) {
  std::string text = absl::StrCat("node ", PrintableBytes(node.node_id()), "\n");
  absl::StrAppend(&text, "state: ", NodeStateText(node.state()), " since ",
                  When(node.state_since_unix_ms()), "\n");
  if (!node.state_reason().empty()) absl::StrAppend(&text, "why: ", node.state_reason(), "\n");
  absl::StrAppend(&text, "address: ", node.address().empty() ? "-" : node.address(), "\n");
  absl::StrAppend(
      &text, "last job: ", node.last_job_id().empty() ? "-" : PrintableBytes(node.last_job_id()),
      " at ", When(node.last_seen_unix_ms()), "\n");
  if (node.checks_size() > 0) {
    absl::StrAppend(&text, "health checks:\n");
    for (const v1::HealthCheckResult& check : node.checks()) {
      absl::StrAppend(&text, "  ", check.name(), ": ", check.passed() ? "passed" : "FAILED", " (",
                      absl::FormatDuration(absl::Milliseconds(check.duration_ms())), ", at ",
                      When(check.time_unix_ms()), ")\n");
      if (!check.output().empty()) {
        absl::StrAppend(&text, "    ", PrintableLines(check.output(), "    "), "\n");
      }
    }
  }
  absl::StrAppend(&text, "incidents: ", node.incident_count(),
                  node.incidents_size() < node.incident_count()
                      ? absl::StrCat(" (the newest ", node.incidents_size(), " kept)")
                      : "",
                  "\n");
  for (const v1::NodeIncident& incident : node.incidents()) {
    absl::StrAppend(
        &text, "  ", When(incident.time_unix_ms()), " ", IncidentKindName(incident.kind()),
        incident.job_id().empty() ? "" : absl::StrCat(" job ", incident.job_id()),
        incident.generation() > 0 ? absl::StrCat(" generation ", incident.generation()) : "", ": ",
        incident.cause(), incident.counted() ? "" : " (not counted)", "\n");
  }
  return text;
}

}  // namespace ddp::ddpctl
