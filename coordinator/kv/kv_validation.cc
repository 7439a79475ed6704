#include "coordinator/kv/kv_validation.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ddp::kv {

std::string AbbreviateForMessage(absl::string_view bytes, size_t max_chars) {
  const bool truncated = bytes.size() > max_chars;
  std::string out = absl::CHexEscape(bytes.substr(0, max_chars));
  if (truncated) absl::StrAppend(&out, "... (", bytes.size(), " bytes)");
  return out;
}

absl::Status ValidateNamespace(absl::string_view ns, const KvLimits& limits) {
  if (ns.empty()) {
    return absl::InvalidArgumentError(
        "namespace is empty; set it to the job id ([A-Za-z0-9._-], 1 to " +
        std::to_string(limits.max_namespace_bytes) + " characters)");
  }
  if (ns.size() > limits.max_namespace_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("namespace '", AbbreviateForMessage(ns), "' is ",
                                                   ns.size(), " bytes; the limit is ",
                                                   limits.max_namespace_bytes));
  }
  for (char c : ns) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("namespace '", AbbreviateForMessage(ns), "' contains '",
                       AbbreviateForMessage(absl::string_view(&c, 1)),
                       "'; only letters, digits, '.', '_' and '-' are allowed"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateKey(absl::string_view key, const KvLimits& limits) {
  if (key.empty()) return absl::InvalidArgumentError("key is empty; give a non-empty key");
  if (key.size() > limits.max_key_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("key '", AbbreviateForMessage(key), "' is ", key.size(),
                     " bytes; the limit is ", limits.max_key_bytes, " bytes (--max-key-bytes)"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePrefix(absl::string_view prefix, const KvLimits& limits) {
  if (prefix.size() > limits.max_key_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("prefix '", AbbreviateForMessage(prefix), "' is ", prefix.size(),
                     " bytes; the limit is ", limits.max_key_bytes, " bytes (--max-key-bytes)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateValue(absl::string_view value, const KvLimits& limits) {
  if (value.size() > limits.max_value_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("value is ", value.size(), " bytes; the limit is ", limits.max_value_bytes,
                     " bytes (--max-value-bytes)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLeaseTtl(int64_t ttl_ms, const KvLimits& limits) {
  if (ttl_ms < limits.min_lease_ttl_ms || ttl_ms > limits.max_lease_ttl_ms) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease ttl_ms ", ttl_ms, " is out of range; give a value from ",
                     limits.min_lease_ttl_ms, " to ", limits.max_lease_ttl_ms));
  }
  return absl::OkStatus();
}

absl::Status ValidateLeaseId(LeaseId id) {
  if (id <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease id ", id, " is invalid; lease ids are positive"));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> ResolveRangeLimit(int64_t limit, const KvLimits& limits) {
  if (limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("range limit ", limit, " is negative; give 0 for the default or a count"));
  }
  if (limit == 0) return limits.default_range_limit;
  if (static_cast<uint64_t>(limit) > limits.max_range_limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("range limit ", limit, " exceeds the maximum page size ",
                     limits.max_range_limit, "; page with start_after instead"));
  }
  return static_cast<size_t>(limit);
}

absl::Status ValidateWaitKeyCount(size_t count, const KvLimits& limits) {
  if (count == 0) return absl::InvalidArgumentError("wait needs at least one key");
  if (count > limits.max_keys_per_request) {
    return absl::ResourceExhaustedError(
        absl::StrCat("wait names ", count, " keys; the limit is ", limits.max_keys_per_request));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> ResolveWaitTimeout(int64_t timeout_ms, const KvLimits& limits) {
  if (timeout_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("wait timeout_ms ", timeout_ms, " is negative; give 0 for the default"));
  }
  if (timeout_ms == 0) return limits.default_wait_timeout;
  const absl::Duration timeout = absl::Milliseconds(timeout_ms);
  if (timeout > limits.max_wait_timeout) {
    return absl::InvalidArgumentError(
        absl::StrCat("wait timeout_ms ", timeout_ms, " exceeds the maximum of ",
                     absl::ToInt64Milliseconds(limits.max_wait_timeout), " ms"));
  }
  return timeout;
}

}  // namespace ddp::kv
