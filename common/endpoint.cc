#include "common/endpoint.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ddp {

absl::Status ValidateEndpoint(absl::string_view what, absl::string_view value) {
  constexpr size_t kMaxShown = 200;
  const size_t colon = value.rfind(':');
  int port = 0;
  bool ok = colon != absl::string_view::npos && colon > 0 && colon <= 255 &&
            absl::SimpleAtoi(value.substr(colon + 1), &port) && port >= 1 && port <= 65535;
  if (ok) {
    const absl::string_view host = value.substr(0, colon);
    ok = std::none_of(host.begin(), host.end(),
                      [](char c) { return absl::ascii_isspace(c) || absl::ascii_iscntrl(c); });
  }
  if (ok) return absl::OkStatus();
  const absl::string_view shown = value.substr(0, kMaxShown);
  return absl::InvalidArgumentError(
      absl::StrCat("invalid value '", shown, value.size() > kMaxShown ? "..." : "", "' for ", what,
                   ": expected HOST:PORT with a port in [1, 65535]"));
}

std::string EndpointHost(absl::string_view endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == absl::string_view::npos) return "";
  absl::string_view host = endpoint.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  return std::string(host);
}

absl::StatusOr<std::vector<std::string>> ParseEndpointList(absl::string_view what,
                                                           absl::string_view value) {
  std::vector<std::string> out;
  for (absl::string_view entry : absl::StrSplit(value, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (absl::Status valid = ValidateEndpoint(what, entry); !valid.ok()) return valid;
    out.emplace_back(entry);
  }
  if (out.size() > kMaxEndpoints) {
    return absl::InvalidArgumentError(absl::StrCat("invalid value for ", what, ": ", out.size(),
                                                   " coordinators; at most ", kMaxEndpoints));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ParseCoordinatorList(absl::string_view what,
                                                              absl::string_view value) {
  constexpr size_t kMaxShown = 200;
  std::vector<std::string> entries;
  for (absl::string_view entry : absl::StrSplit(value, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    const absl::string_view given = entry;
    if (!absl::ConsumePrefix(&entry, "grpc://")) absl::ConsumePrefix(&entry, "http://");
    const size_t scheme = entry.find("://");
    if (scheme != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid value '", given.substr(0, kMaxShown), "' for ", what, ": scheme '",
                       entry.substr(0, std::min<size_t>(scheme, 20)),
                       "://' is not one of grpc://, http:// (TLS: --tls-ca, not the address)"));
    }
    if (!entry.empty() && entry.back() == '/') entry.remove_suffix(1);
    // A port is there when the last ':' comes after an IPv6 literal's ']'
    // (a bare IPv6 address without brackets cannot carry a port).
    const size_t colon = entry.rfind(':');
    const size_t bracket = entry.rfind(']');
    const bool has_port =
        colon != absl::string_view::npos && (bracket == absl::string_view::npos || colon > bracket);
    entries.push_back(has_port || entry.empty()
                          ? std::string(entry)
                          : absl::StrCat(entry, ":", kDefaultCoordinatorPort));
  }
  return ParseEndpointList(what, absl::StrJoin(entries, ","));
}

}  // namespace ddp
