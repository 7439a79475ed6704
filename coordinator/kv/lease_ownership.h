#ifndef DDP_COORDINATOR_KV_LEASE_OWNERSHIP_H_
#define DDP_COORDINATOR_KV_LEASE_OWNERSHIP_H_

// Who a lease belongs to, and who may act on it (issue 23: job B's token must
// not revoke, keep alive or attach keys to job A's lease).
//
// A lease belongs to the namespace (job) that granted it, its owner; a lease
// granted by an unrestricted caller without a namespace belongs to none.
// A caller restricted to a namespace (a job's token) may keep alive, revoke
// and attach keys to the leases of its namespace only; anything else is
// PERMISSION_DENIED. An unrestricted caller (the admin token, or a coordinator
// without authorization) may act on every lease.
//
// Lease ids are random 63-bit positive numbers (the kernel's CSPRNG), not a
// sequence: an id names a lease but cannot be guessed from another one.
//
// Persistence. The owner is kept as one key per owned lease in the reserved
// namespace kLeaseOwnerNamespace ('@' is not a valid client namespace, so no
// call can read, write or watch it): key = the lease id as 16 hex digits,
// value = the owner namespace, attached to the lease itself. It is written in
// the grant's transaction and deleted with the lease (revoke or expiry) by the
// same write, and every backend (SQLite, etcd, memory) stores it as any other
// key: no schema change, and a store written before keeps working. Status does
// not count these keys and LeaseRevoke does not count them as deleted.
//
// Leases granted before leases had owners (no owner key): a lease whose keys
// all lie in one namespace belongs to that namespace (decided again at every
// load); a lease with no keys, or with keys in several namespaces, belongs to
// no job (admin token only). Their ids stay valid.
//
// Thread-safety: the functions are thread-safe.

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "coordinator/kv/kv_types.h"

namespace ddp::kv {

// The reserved namespace of the owner keys.
inline constexpr char kLeaseOwnerNamespace[] = "@lease-owners";

// A random lease id in [1, 2^63 - 1] from getrandom(2). Aborts if the kernel
// has no entropy to give (nothing safe to do then).
LeaseId RandomLeaseId();
// Where new lease ids come from: RandomLeaseId, or a fixed sequence in tests.
using LeaseIdSource = std::function<LeaseId()>;

// The owner key of lease `id` ("00000000000000ff"), and back (nullopt for a
// key that is not one).
std::string LeaseOwnerKey(LeaseId id);
std::optional<LeaseId> LeaseIdOfOwnerKey(absl::string_view key);

// OK when `caller` may `action` (e.g. "revoke") lease `id` owned by `owner`
// ("": no job). PERMISSION_DENIED otherwise, naming the lease and the
// caller's namespace (never the owner: a job learns no other job's name).
absl::Status CheckLeaseCaller(LeaseId id, absl::string_view owner, const LeaseCaller& caller,
                              absl::string_view action);

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_LEASE_OWNERSHIP_H_
