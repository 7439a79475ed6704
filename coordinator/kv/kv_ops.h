#ifndef DDP_COORDINATOR_KV_KV_OPS_H_
#define DDP_COORDINATOR_KV_KV_OPS_H_

// Requests and results of the KvStore operations (the plain C++ mirror of
// proto/ddp/v1/kv.proto). No behaviour lives here.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/kv/kv_types.h"
#include "coordinator/kv/published_events.h"

namespace ddp::kv {

struct PutRequest {
  enum class Condition { kNone, kExpectedModRevision, kAbsent };
  std::string ns;
  std::string key;
  std::string value;
  LeaseId lease = 0;  // 0: no lease (a put without lease detaches the key from its lease)
  Condition condition = Condition::kNone;
  Revision expected_mod_revision = 0;  // with kExpectedModRevision; 0 = must be absent
  bool return_previous = false;
  // Who attaches the key to `lease` (PERMISSION_DENIED for another job's lease).
  LeaseCaller lease_caller;
};

struct PutResult {
  Revision revision = 0;
  std::optional<KeyValue> previous;  // set only with return_previous and an existing key
};

struct GetRequest {
  std::string ns;
  std::string key;
  // 0: the current value; else the key as it was at this revision (see
  // KvStore::Get).
  Revision revision = 0;
};

struct GetResult {
  KeyValue kv;
  Revision revision = 0;  // store revision at the time of the read
};

struct RangeRequest {
  std::string ns;
  std::string prefix;       // empty: the whole namespace
  int64_t limit = 0;        // 0: KvLimits::default_range_limit
  std::string start_after;  // continuation: keys strictly greater than this
  bool keys_only = false;
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  bool more = false;
  std::string next_start_after;
  Revision revision = 0;
};

struct DeleteRequest {
  std::string ns;
  std::string key;
  bool prefix = false;  // delete every key starting with `key`
};

struct DeleteResult {
  int64_t deleted = 0;
  Revision revision = 0;  // of this write; the current revision when nothing was deleted
};

struct CompareAndSetRequest {
  std::string ns;
  std::string key;
  std::string expected;  // a missing key matches an empty `expected`
  std::string desired;
};

struct CompareAndSetResult {
  std::string value;  // the value after the call
  bool swapped = false;
  Revision revision = 0;
};

struct AddRequest {
  std::string ns;
  std::string key;
  int64_t delta = 0;
};

struct AddResult {
  int64_t value = 0;
  Revision revision = 0;
};

struct WaitRequest {
  std::string ns;
  std::vector<std::string> keys;
  int64_t timeout_ms = 0;  // 0: KvLimits::default_wait_timeout
};

struct WaitResult {
  Revision revision = 0;
};

struct WatchRequest {
  std::string ns;
  std::string prefix;
  Revision start_revision = 0;  // 0: only changes after the current revision
};

// What one Take hands a watcher: its next events in revision order, as shared
// chunks (see published_events.h). A live chunk is one commit (or the part of
// it the watcher matches), shared with other watchers; a history page is a
// chunk of its own. Chunks are never empty.
struct WatchBatch {
  std::vector<PublishedEventsPtr> chunks;
  Revision revision = 0;  // the published store revision when taken
  // Every event the watcher matches up to this revision is in this batch or
  // an earlier one (a history page may end inside a revision, so this can be
  // below the last event's revision). A consumer that stops after sending the
  // batch tells its client to watch again from complete_through + 1.
  Revision complete_through = 0;

  bool empty() const { return chunks.empty(); }
  size_t event_count() const {
    size_t n = 0;
    for (const PublishedEventsPtr& chunk : chunks) n += chunk->size();
    return n;
  }
  // A flat copy of the events (tests and tools; the server sends the chunks).
  std::vector<Event> CopyEvents() const {
    std::vector<Event> events;
    for (const PublishedEventsPtr& chunk : chunks) {
      events.insert(events.end(), chunk->events().begin(), chunk->events().end());
    }
    return events;
  }
};

struct LeaseGrantRequest {
  int64_t ttl_ms = 0;
  // The namespace the lease belongs to ("": none, only unrestricted callers
  // may use it); see lease_ownership.h.
  std::string owner;
};

struct LeaseGrantResult {
  LeaseId lease = 0;
  int64_t ttl_ms = 0;
};

struct LeaseKeepAliveResult {
  LeaseId lease = 0;
  int64_t ttl_ms = 0;
};

// KvStore::LeaseTimeToLive (etcdctl's lease timetolive).
struct LeaseTimeToLiveResult {
  LeaseId lease = 0;
  int64_t remaining_ms = 0;  // 0 when due
  int64_t granted_ttl_ms = 0;
  std::vector<std::pair<std::string, std::string>> keys;  // (namespace, key), sorted
};

struct LeaseRevokeResult {
  int64_t deleted = 0;
  Revision revision = 0;
};

struct CompactResult {
  // Highest revision whose history is gone (watches from it or below fail).
  Revision compacted_revision = 0;
};

// One namespace that holds keys (KvStore::ListNamespaces).
struct NamespaceKeys {
  std::string ns;
  int64_t keys = 0;
};

struct NamespaceList {
  std::vector<NamespaceKeys> namespaces;  // in name order
  Revision revision = 0;
};

struct KvStoreStatus {
  Revision revision = 0;
  Revision compacted_revision = 0;
  int64_t keys = 0;
  int64_t leases = 0;
  int64_t watchers = 0;
  int64_t pending_waits = 0;
};

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_KV_KV_OPS_H_
