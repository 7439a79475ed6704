#ifndef DDP_COORDINATOR_KV_KV_VALIDATION_H_
#define DDP_COORDINATOR_KV_KV_VALIDATION_H_

// Input checks of the key-value store, shared by the core and the gRPC adapter
// (which runs them before copying anything out of a request). Every error names
// the offending value (size-capped, escaped) and the limit, and says what to
// do.
//
// Thread-safety: stateless functions.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "coordinator/kv/kv_types.h"

namespace ddp::kv {

// A printable, size-capped rendering of arbitrary bytes for error messages.
std::string AbbreviateForMessage(absl::string_view bytes, size_t max_chars = 64);

// Namespace: [A-Za-z0-9._-]{1,max_namespace_bytes}. Errors: INVALID_ARGUMENT.
absl::Status ValidateNamespace(absl::string_view ns, const KvLimits& limits);

// Key: 1..max_key_bytes bytes, any content.
// Errors: INVALID_ARGUMENT (empty), RESOURCE_EXHAUSTED (too long).
absl::Status ValidateKey(absl::string_view key, const KvLimits& limits);

// Prefix: 0..max_key_bytes bytes. Errors: RESOURCE_EXHAUSTED (too long).
absl::Status ValidatePrefix(absl::string_view prefix, const KvLimits& limits);

// Value: 0..max_value_bytes bytes. Errors: RESOURCE_EXHAUSTED (too long).
absl::Status ValidateValue(absl::string_view value, const KvLimits& limits);

// Errors: INVALID_ARGUMENT unless min_lease_ttl_ms <= ttl_ms <=
// max_lease_ttl_ms.
absl::Status ValidateLeaseTtl(int64_t ttl_ms, const KvLimits& limits);

// Errors: INVALID_ARGUMENT unless id > 0.
absl::Status ValidateLeaseId(LeaseId id);

// The page size of a Range: `limit` or the default for 0.
// Errors: INVALID_ARGUMENT (negative), RESOURCE_EXHAUSTED (above
// max_range_limit).
absl::StatusOr<size_t> ResolveRangeLimit(int64_t limit, const KvLimits& limits);

// Errors: INVALID_ARGUMENT (no keys), RESOURCE_EXHAUSTED (above
// max_keys_per_request).
absl::Status ValidateWaitKeyCount(size_t count, const KvLimits& limits);

// The timeout of a Wait: `timeout_ms` or the default for 0.
// Errors: INVALID_ARGUMENT (negative or above max_wait_timeout).
absl::StatusOr<absl::Duration> ResolveWaitTimeout(int64_t timeout_ms, const KvLimits& limits);

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_KV_VALIDATION_H_
