#ifndef DDP_COORDINATOR_KV_KV_TYPES_H_
#define DDP_COORDINATOR_KV_KV_TYPES_H_

// Plain value types of the key-value store, shared by the core (KvStore), the storage
// backends and the gRPC adapter. No behaviour lives here.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace ddp::kv {

// Revisions are store-wide and start at 1 for the first write; 0 means "none".
using Revision = int64_t;
using LeaseId = int64_t;

struct KeyValue {
  std::string ns;
  std::string key;
  std::string value;
  Revision create_revision = 0;
  Revision mod_revision = 0;
  int64_t version = 0;
  LeaseId lease = 0;

  friend bool operator==(const KeyValue& a, const KeyValue& b) {
    return a.ns == b.ns && a.key == b.key && a.value == b.value &&
           a.create_revision == b.create_revision && a.mod_revision == b.mod_revision &&
           a.version == b.version && a.lease == b.lease;
  }
};

enum class EventType { kPut = 0, kDelete = 1 };

// One change. For kDelete, kv holds ns, key and mod_revision (the deleting revision);
// the other fields are zero/empty.
struct Event {
  EventType type = EventType::kPut;
  KeyValue kv;

  Revision revision() const { return kv.mod_revision; }
  friend bool operator==(const Event& a, const Event& b) {
    return a.type == b.type && a.kv == b.kv;
  }
};

struct LeaseRecord {
  LeaseId id = 0;
  // Time to live granted; after a coordinator restart every lease gets a full TTL again
  // (as etcd does on leader change), so only the TTL is persisted, not the deadline.
  int64_t ttl_ms = 0;

  friend bool operator==(const LeaseRecord& a, const LeaseRecord& b) {
    return a.id == b.id && a.ttl_ms == b.ttl_ms;
  }
};

// Who acts on a lease. A lease belongs to the namespace (job) that granted it
// (see lease_ownership.h); a caller restricted to a namespace may act only on
// the leases of that namespace, an unrestricted one (the admin token, or a
// coordinator without authorization) on every lease.
struct LeaseCaller {
  std::optional<std::string> ns;  // nullopt: unrestricted

  static LeaseCaller Anyone() { return LeaseCaller{}; }
  static LeaseCaller OfNamespace(std::string ns) { return LeaseCaller{std::move(ns)}; }
};

// Hard limits checked before anything is allocated or stored. Every violation is an
// INVALID_ARGUMENT or RESOURCE_EXHAUSTED error that names the value and the limit.
struct KvLimits {
  size_t max_key_bytes = 4096;                        // RESOURCE_EXHAUSTED above
  size_t max_value_bytes = 1 << 20;                   // 1 MiB; RESOURCE_EXHAUSTED above
  size_t max_namespace_bytes = 128;                   // namespace: [A-Za-z0-9._-]{1,128}
  size_t max_keys_per_request = 1024;                 // Wait keys; RESOURCE_EXHAUSTED above
  size_t default_range_limit = 1000;                  // Range with limit 0
  size_t max_range_limit = 10000;                     // Range limit; RESOURCE_EXHAUSTED above
  int64_t min_lease_ttl_ms = 100;                     // INVALID_ARGUMENT below
  int64_t max_lease_ttl_ms = 7 * 24 * 3600 * 1000LL;  // INVALID_ARGUMENT above
  absl::Duration default_wait_timeout = absl::Seconds(300);  // TCPStore's default
  absl::Duration max_wait_timeout = absl::Hours(24);
  size_t max_leases = 1'000'000;            // RESOURCE_EXHAUSTED above
  size_t max_watchers = 100'000;            // RESOURCE_EXHAUSTED above
  size_t max_pending_wait_calls = 100'000;  // RESOURCE_EXHAUSTED above
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_KV_TYPES_H_
