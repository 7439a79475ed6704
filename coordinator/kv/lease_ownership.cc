#include "coordinator/kv/lease_ownership.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ddp::kv {

LeaseId RandomLeaseId() {
  while (true) {
    uint64_t bits = 0;
    const ssize_t got = getrandom(&bits, sizeof(bits), 0);
    if (got != static_cast<ssize_t>(sizeof(bits))) {
      if (got < 0 && errno == EINTR) continue;
      std::abort();  // no entropy: an id that could be guessed is worse than none
    }
    const LeaseId id = static_cast<LeaseId>(bits >> 1);  // 63 bits, never negative
    if (id != 0) return id;
  }
}

std::string LeaseOwnerKey(LeaseId id) {
  return absl::StrFormat("%016x", static_cast<uint64_t>(id));
}

std::optional<LeaseId> LeaseIdOfOwnerKey(absl::string_view key) {
  uint64_t id = 0;
  if (key.size() != 16 || !absl::SimpleHexAtoi(key, &id) || id == 0 || id > INT64_MAX) {
    return std::nullopt;
  }
  return static_cast<LeaseId>(id);
}

absl::Status CheckLeaseCaller(LeaseId id, absl::string_view owner, const LeaseCaller& caller,
                              absl::string_view action) {
  if (!caller.ns.has_value() || (!owner.empty() && owner == *caller.ns)) {
    return absl::OkStatus();
  }
  if (owner.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "lease ", id,
        " belongs to no job (granted by the admin without a namespace, or before "
        "leases had owners); the token of '",
        caller.ns->substr(0, 128), "' may not ", action, " it: grant a lease of your own"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat("lease ", id, " belongs to another namespace, not '", caller.ns->substr(0, 128),
                   "'; a job may ", action, " only the leases it granted: grant one of your own"));
}

}  // namespace ddp::kv
