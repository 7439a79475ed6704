// ddpctl's view of the coordinators themselves: `cluster status`, and the
// leader search every command makes when --coordinator names several.

#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/coordinator_endpoints.h"
#include "common/grpc_tls.h"
#include "tools/ddpctl/grpc_command_context.h"
#include "tools/ddpctl/json_output.h"

namespace ddp::ddpctl {
namespace {

std::shared_ptr<grpc::Channel> ChannelTo(const std::string& endpoint, const GlobalOptions& g) {
  return CoordinatorChannel(endpoint, g.tls, g.token, grpc::ChannelArguments());
}

// One GetClusterStatus; `hint` gets the ddp-leader of a refusal.
grpc::Status AskStatus(const std::string& endpoint, const GlobalOptions& g, bool etcd_health,
                       v1::ClusterStatus* out, std::string* hint) {
  auto stub = v1::ClusterService::NewStub(ChannelTo(endpoint, g));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + g.timeout));
  v1::GetClusterStatusRequest request;
  request.set_etcd_health(etcd_health);
  grpc::Status status = stub->GetClusterStatus(&context, request, out);
  if (hint != nullptr) *hint = LeaderHint(context);
  return status;
}

// KeyValueService.Status of one coordinator (a standby refuses it: the
// caller prints "-").
grpc::Status AskKvStatus(const std::string& endpoint, const GlobalOptions& g,
                         v1::StatusResponse* out) {
  auto stub = v1::KeyValueService::NewStub(ChannelTo(endpoint, g));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + g.timeout));
  return stub->Status(&context, v1::StatusRequest(), out);
}

// "0.1.0" of "ddp-coordinator 0.1.0" (the column holds one word).
std::string VersionNumber(absl::string_view version) {
  const size_t space = version.rfind(' ');
  return std::string(space == absl::string_view::npos ? version : version.substr(space + 1));
}

// A database size as etcdctl's table prints it; "-" when unknown (0).
std::string DatabaseSize(int64_t bytes) {
  if (bytes <= 0) return "-";
  if (bytes < (int64_t{1} << 20)) return absl::StrCat(bytes / 1024, " kB");
  return absl::StrFormat("%.1f MB", static_cast<double>(bytes) / (1 << 20));
}

std::string RoleName(v1::ClusterStatus::Role role) {
  switch (role) {
    case v1::ClusterStatus::SINGLE:
      return "single";
    case v1::ClusterStatus::LEADER:
      return "LEADER";
    case v1::ClusterStatus::STANDBY:
      return "standby";
    default:
      return "unknown";
  }
}

grpc::Status ClusterStatusCommand(CommandContext& c) {
  std::vector<std::string> endpoints = absl::StrSplit(c.invocation.global.coordinator, ',');
  std::vector<v1::ClusterStatus> answers;
  std::ostringstream table;
  // As etcdctl's `endpoint status`: one row an endpoint, whether it leads,
  // its revision and version.
  // DB SIZE: SQLite's coordinator.db with its log (etcd's members below).
  constexpr char kRow[] = "%-24s %-8s %-9s %-24s %-9s %-9s %-8s %-8s %s\n";
  table << absl::StrFormat(kRow, "COORDINATOR", "ROLE", "IS LEADER", "LEADER", "REVISION",
                           "COMPACTED", "VERSION", "DB SIZE", "STORE");
  std::vector<std::string> leader_changes;
  const v1::ClusterStatus* with_etcd = nullptr;
  bool any = false;
  for (const std::string& endpoint : endpoints) {
    v1::ClusterStatus status;
    grpc::Status answer = AskStatus(endpoint, c.invocation.global, true, &status, nullptr);
    if (!answer.ok()) {
      table << absl::StrFormat(
          "%-24s %-8s %s\n", endpoint, "DOWN",
          absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(answer.error_code())),
                       ": ", answer.error_message().substr(0, 100)));
      continue;
    }
    any = true;
    answers.push_back(status);
    v1::StatusResponse kv;
    const bool serves = AskKvStatus(endpoint, c.invocation.global, &kv).ok();
    const bool leads = status.role() != v1::ClusterStatus::STANDBY;
    table << absl::StrFormat(
        kRow, endpoint, RoleName(status.role()), leads ? "true" : "false",
        status.has_leader() ? status.leader().grpc_address() : "(none elected)",
        serves ? absl::StrCat(kv.revision()) : "-",
        serves ? absl::StrCat(kv.compacted_revision()) : "-",
        serves && !kv.version().empty() ? VersionNumber(kv.version()) : "-",
        DatabaseSize(status.database_bytes()), status.store());
    leader_changes.push_back(absl::StrCat(endpoint, " ", status.leader_changes()));
  }
  if (!any) {
    return grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        absl::StrCat("no coordinator of ", c.invocation.global.coordinator, " answered"));
  }
  if (c.json()) {
    for (const v1::ClusterStatus& status : answers) c.out << CliJson(status) << "\n";
    return grpc::Status::OK;
  }
  for (const v1::ClusterStatus& status : answers) {
    if (status.etcd_endpoints_size() > 0) {
      with_etcd = &status;
      break;
    }
  }
  c.out << table.str();
  if (with_etcd != nullptr) {
    c.out << "\n"
          << absl::StrFormat("%-24s %-8s %-8s %-6s %-10s %s\n", "ETCD MEMBER", "HEALTH", "VERSION",
                             "RAFT", "DB", "ERROR");
    for (const v1::EtcdEndpointStatus& e : with_etcd->etcd_endpoints()) {
      c.out << absl::StrFormat(
          "%-24s %-8s %-8s %-6s %-10s %s\n", e.endpoint(), e.healthy() ? "healthy" : "FAILING",
          e.version(), e.is_raft_leader() ? "leader" : "",
          e.db_size_bytes() > 0 ? absl::StrCat(e.db_size_bytes() / 1024, " KiB") : "", e.error());
    }
    c.out << "\nleader lease " << with_etcd->leader_lease_ms()
          << " ms; leader changes seen: " << absl::StrJoin(leader_changes, ", ") << "\n";
  }
  return grpc::Status::OK;
}

}  // namespace

std::map<std::string, Handler> ClusterCommandHandlers() {
  return {{"cluster status", ClusterStatusCommand}};
}

absl::StatusOr<std::string> FindLeader(const std::vector<std::string>& endpoints,
                                       const GlobalOptions& global) {
  CoordinatorEndpoints candidates(endpoints);
  std::vector<std::string> answers;
  for (size_t attempt = 0; attempt < 2 * endpoints.size() + 2; ++attempt) {
    const std::string endpoint = candidates.current();
    v1::ClusterStatus status;
    std::string hint;
    grpc::Status answer = AskStatus(endpoint, global, false, &status, &hint);
    if (answer.ok() && status.role() != v1::ClusterStatus::STANDBY) return endpoint;
    if (answer.ok()) {
      hint = status.has_leader() ? status.leader().grpc_address() : "";
      answers.push_back(
          absl::StrCat(endpoint, ": standby, leader ", hint.empty() ? "not elected yet" : hint));
    } else {
      answers.push_back(absl::StrCat(endpoint, ": ", answer.error_message().substr(0, 120)));
    }
    candidates.Next(hint);
  }
  return absl::UnavailableError(absl::StrCat("no coordinator of ", absl::StrJoin(endpoints, ","),
                                             " leads (", absl::StrJoin(answers, "; "),
                                             "); retry, or see ddpctl cluster status"));
}

}  // namespace ddp::ddpctl
