#include "coordinator/storage/etcd/etcd_store_spec.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ddp::storage {
namespace {

constexpr absl::string_view kScheme = "etcd://";
constexpr size_t kMaxPrefixBytes = 256;

absl::Status Bad(absl::string_view spec, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--store='", spec, "': ", why, "; the form is etcd://HOST:PORT[,HOST:PORT...][/PREFIX]"));
}

bool IsIpv4(absl::string_view host) {
  std::vector<absl::string_view> parts = absl::StrSplit(host, '.');
  if (parts.size() != 4) return false;
  for (absl::string_view part : parts) {
    int value = 0;
    if (part.empty() || part.size() > 3 || !absl::SimpleAtoi(part, &value) || value > 255) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<EtcdStoreSpec> ParseEtcdStoreSpec(absl::string_view spec) {
  if (!absl::StartsWith(spec, kScheme)) return Bad(spec, "it does not start with etcd://");
  absl::string_view rest = spec.substr(kScheme.size());
  EtcdStoreSpec out;
  const size_t slash = rest.find('/');
  if (slash != absl::string_view::npos) {
    absl::string_view prefix = rest.substr(slash);
    while (absl::EndsWith(prefix, "/")) prefix.remove_suffix(1);
    if (prefix.empty()) return Bad(spec, "the prefix after the hosts is empty");
    if (prefix.size() > kMaxPrefixBytes) {
      return Bad(spec, absl::StrCat("the prefix is longer than ", kMaxPrefixBytes, " bytes"));
    }
    out.prefix = std::string(prefix);
    rest = rest.substr(0, slash);
  }
  for (absl::string_view endpoint : absl::StrSplit(rest, ',')) {
    const size_t colon = endpoint.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return Bad(
          spec, absl::StrCat("endpoint '", endpoint, "' is not HOST:PORT with a port in 1..65535"));
    }
    out.endpoints.emplace_back(endpoint);
  }
  return out;
}

std::string EtcdTarget(const std::vector<std::string>& endpoints) {
  if (endpoints.size() == 1) return endpoints[0];
  for (const std::string& endpoint : endpoints) {
    if (!IsIpv4(absl::string_view(endpoint).substr(0, endpoint.rfind(':')))) return endpoints[0];
  }
  return absl::StrCat("ipv4:", absl::StrJoin(endpoints, ","));
}

}  // namespace ddp::storage
