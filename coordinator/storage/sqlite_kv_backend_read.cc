// SqliteKvBackend's read side: Load (kv_keys, then the events kv_keys does not
// reflect yet, replayed in commit order; leases) and ReadEvents (watch history
// from one read snapshot). The schema, Open and Commit are in
// sqlite_kv_backend.cc; background work in sqlite_kv_backend_maintenance.cc.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "coordinator/storage/sqlite_kv_backend.h"
#include "coordinator/storage/write_batch_checks.h"

namespace ddp::kv {
namespace {

using storage::SqliteStatement;

// The events kv_keys does not reflect yet, in commit order.
constexpr char kSelectEventsAfter[] =
    "SELECT type, ns, key, value, create_revision, revision, version, lease "
    "FROM kv_events WHERE revision > ?1 ORDER BY id";
// ?4 NULL: no upper bound (the prefix is empty or all 0xFF bytes).
constexpr char kSelectEvents[] =
    "SELECT type, key, value, create_revision, revision, version, lease FROM "
    "kv_events "
    "WHERE ns = ?1 AND revision >= ?2 AND key >= ?3 AND (?4 IS NULL OR key < "
    "?4) "
    "ORDER BY revision, seq LIMIT ?5";

// The smallest byte string greater than every string that starts with `prefix`,
// or false when there is none (empty prefix, or only 0xFF bytes).
bool PrefixUpperBound(const std::string& prefix, std::string* bound) {
  std::string result = prefix;
  while (!result.empty() && static_cast<unsigned char>(result.back()) == 0xFF) {
    result.pop_back();
  }
  if (result.empty()) return false;
  result.back() = static_cast<char>(static_cast<unsigned char>(result.back()) + 1);
  *bound = std::move(result);
  return true;
}

}  // namespace

absl::StatusOr<PersistedKvState> SqliteKvBackend::Load() {
  absl::MutexLock lock(&write_mu_);
  DDP_ASSIGN_OR_RETURN(Meta meta, ReadMetaLocked());
  PersistedKvState state;
  state.revision = meta.revision;
  state.compacted_revision = meta.compacted_revision;
  state.next_lease_id = meta.next_lease_id;

  DDP_ASSIGN_OR_RETURN(int64_t max_event_revision,
                       write_db_->QueryInt64("SELECT IFNULL(MAX(revision), 0) FROM kv_events"));
  if (max_event_revision > state.revision) {
    return DataLoss(absl::StrFormat("an event has revision %d, after the store's revision %d",
                                    max_event_revision, state.revision));
  }

  DDP_ASSIGN_OR_RETURN(
      SqliteStatement keys,
      write_db_->Prepare("SELECT ns, key, value, create_revision, mod_revision, version, lease "
                         "FROM kv_keys"));
  while (true) {
    DDP_ASSIGN_OR_RETURN(bool row, keys.Step());
    if (!row) break;
    KeyValue kv;
    kv.ns = keys.ColumnBlob(0);
    kv.key = keys.ColumnBlob(1);
    kv.value = keys.ColumnBlob(2);
    kv.create_revision = keys.ColumnInt64(3);
    kv.mod_revision = keys.ColumnInt64(4);
    kv.version = keys.ColumnInt64(5);
    kv.lease = keys.ColumnInt64(6);
    state.keys.push_back(std::move(kv));
  }
  DDP_RETURN_IF_ERROR(ReplayEventsLocked(meta, &state));
  for (const KeyValue& kv : state.keys) {
    if (kv.mod_revision < 1 || kv.mod_revision > state.revision || kv.create_revision < 1 ||
        kv.create_revision > kv.mod_revision) {
      return DataLoss(absl::StrFormat(
          "key '%s' in namespace '%s' has create_revision %d "
          "and mod_revision %d; "
          "expected 1 <= create <= mod <= revision %d",
          absl::CHexEscape(kv.key.substr(0, 64)), absl::CHexEscape(kv.ns.substr(0, 64)),
          kv.create_revision, kv.mod_revision, state.revision));
    }
  }

  DDP_ASSIGN_OR_RETURN(SqliteStatement leases,
                       write_db_->Prepare("SELECT id, ttl_ms FROM kv_leases ORDER BY id"));
  while (true) {
    DDP_ASSIGN_OR_RETURN(bool row, leases.Step());
    if (!row) break;
    LeaseRecord lease;
    lease.id = leases.ColumnInt64(0);
    lease.ttl_ms = leases.ColumnInt64(1);
    if (lease.id < 1) return DataLoss(absl::StrFormat("a lease has id %d", lease.id));
    state.leases.push_back(lease);
  }
  meta_ = meta;
  return state;
}

absl::Status SqliteKvBackend::ReplayEventsLocked(const Meta& meta, PersistedKvState* state) {
  DDP_ASSIGN_OR_RETURN(SqliteStatement events, write_db_->Prepare(kSelectEventsAfter));
  DDP_RETURN_IF_ERROR(events.BindInt64(1, meta.keys_revision));
  // Built on the first event only: a cleanly closed file has none to replay.
  absl::flat_hash_map<DeferredKeyWrites::KeyRef, size_t> index;
  std::vector<bool> alive;
  absl::flat_hash_map<DeferredKeyWrites::KeyRef, std::optional<KeyValue>> changes;
  while (true) {
    DDP_ASSIGN_OR_RETURN(bool row, events.Step());
    if (!row) break;
    if (alive.empty() && !state->keys.empty()) {
      alive.assign(state->keys.size(), true);
      for (size_t i = 0; i < state->keys.size(); ++i) {
        index.emplace(DeferredKeyWrites::KeyRef(state->keys[i].ns, state->keys[i].key), i);
      }
    }
    const int64_t type = events.ColumnInt64(0);
    DeferredKeyWrites::KeyRef ref(events.ColumnBlob(1), events.ColumnBlob(2));
    auto it = index.find(ref);
    if (type == static_cast<int64_t>(EventType::kDelete)) {
      if (it != index.end()) alive[it->second] = false;
      changes[std::move(ref)] = std::nullopt;
      continue;
    }
    if (type != static_cast<int64_t>(EventType::kPut)) {
      return DataLoss(absl::StrFormat("an event has unknown type %d", type));
    }
    KeyValue kv;
    kv.ns = ref.first;
    kv.key = ref.second;
    kv.value = events.ColumnBlob(3);
    kv.create_revision = events.ColumnInt64(4);
    kv.mod_revision = events.ColumnInt64(5);
    kv.version = events.ColumnInt64(6);
    kv.lease = events.ColumnInt64(7);
    if (it != index.end()) {
      state->keys[it->second] = kv;
      alive[it->second] = true;
    } else {
      index.emplace(ref, state->keys.size());
      state->keys.push_back(kv);
      alive.push_back(true);
    }
    changes[std::move(ref)] = std::move(kv);
  }
  if (!changes.empty()) {
    size_t kept = 0;
    for (size_t i = 0; i < state->keys.size(); ++i) {
      if (!alive[i]) continue;
      if (kept != i) state->keys[kept] = std::move(state->keys[i]);
      ++kept;
    }
    state->keys.resize(kept);
  }
  std::vector<KeyChange> pending;
  pending.reserve(changes.size());
  for (auto& [ref, kv] : changes) pending.emplace_back(ref, std::move(kv));
  deferred_.Reset(meta.keys_revision, meta.revision, std::move(pending));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Event>> SqliteKvBackend::ReadEvents(const std::string& ns,
                                                               const std::string& prefix,
                                                               Revision from_revision,
                                                               size_t max_events) {
  absl::MutexLock lock(&read_mu_);
  std::vector<Event> events;
  // One read transaction: the compacted revision and the events come from one
  // snapshot, so a concurrent Compact cannot leave holes in what is returned.
  DDP_ASSIGN_OR_RETURN(SqliteStatement * begin, read_db_->PrepareCached("BEGIN"));
  DDP_RETURN_IF_ERROR(begin->Run());
  absl::Status status = ReadEventsLocked(ns, prefix, from_revision, max_events, &events);
  absl::StatusOr<SqliteStatement*> end = read_db_->PrepareCached("COMMIT");
  absl::Status end_status = end.ok() ? (*end)->Run() : end.status();
  if (!end_status.ok() && !read_db_->InAutocommit()) {
    read_db_->Execute("ROLLBACK").IgnoreError();
  }
  if (!status.ok()) return status;
  if (!end_status.ok()) return end_status;
  return events;
}

absl::Status SqliteKvBackend::ReadEventsLocked(const std::string& ns, const std::string& prefix,
                                               Revision from_revision, size_t max_events,
                                               std::vector<Event>* out) {
  DDP_ASSIGN_OR_RETURN(int64_t compacted,
                       read_db_->QueryInt64("SELECT compacted_revision FROM kv_meta WHERE id = 1"));
  DDP_RETURN_IF_ERROR(CheckReadFrom(from_revision, compacted));
  if (max_events == 0) return absl::OkStatus();

  DDP_ASSIGN_OR_RETURN(SqliteStatement * select, read_db_->PrepareCached(kSelectEvents));
  SqliteStatement& s = *select;
  DDP_RETURN_IF_ERROR(s.BindBlob(1, ns));
  DDP_RETURN_IF_ERROR(s.BindInt64(2, from_revision));
  DDP_RETURN_IF_ERROR(s.BindBlob(3, prefix));
  std::string upper;
  if (PrefixUpperBound(prefix, &upper)) {
    DDP_RETURN_IF_ERROR(s.BindBlob(4, upper));
  } else {
    DDP_RETURN_IF_ERROR(s.BindNull(4));
  }
  const uint64_t limit = std::min<uint64_t>(max_events, std::numeric_limits<int64_t>::max());
  DDP_RETURN_IF_ERROR(s.BindInt64(5, static_cast<int64_t>(limit)));
  while (true) {
    absl::StatusOr<bool> row = s.Step();
    if (!row.ok()) {
      s.Reset();
      return row.status();
    }
    if (!*row) break;
    Event event;
    const int64_t type = s.ColumnInt64(0);
    if (type != static_cast<int64_t>(EventType::kPut) &&
        type != static_cast<int64_t>(EventType::kDelete)) {
      s.Reset();
      return DataLoss(absl::StrFormat("an event has unknown type %d", type));
    }
    event.type = static_cast<EventType>(type);
    event.kv.ns = ns;
    event.kv.key = s.ColumnBlob(1);
    event.kv.value = s.ColumnBlob(2);
    event.kv.create_revision = s.ColumnInt64(3);
    event.kv.mod_revision = s.ColumnInt64(4);
    event.kv.version = s.ColumnInt64(5);
    event.kv.lease = s.ColumnInt64(6);
    out->push_back(std::move(event));
  }
  s.Reset();
  return absl::OkStatus();
}

}  // namespace ddp::kv
