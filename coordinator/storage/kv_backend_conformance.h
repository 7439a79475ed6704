#ifndef DDP_COORDINATOR_STORAGE_KV_BACKEND_CONFORMANCE_H_
#define DDP_COORDINATOR_STORAGE_KV_BACKEND_CONFORMANCE_H_

// The contract of kv_backend.h as one typed GoogleTest suite. Every KvBackend
// implementation instantiates it with a factory type F:
//
//   struct F {
//     F();  // fresh, empty storage for one test
//     // Opens the storage (a new object each call for durable backends).
//     absl::StatusOr<std::unique_ptr<ddp::kv::KvBackend>> Open();
//     // Closes `backend` and opens the same storage again. A durable backend
//     must
//     // destroy it and reopen from disk; a volatile one returns it unchanged.
//     absl::StatusOr<std::unique_ptr<ddp::kv::KvBackend>> Reopen(
//         std::unique_ptr<ddp::kv::KvBackend> backend);
//   };
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, KvBackendConformanceTest,
//   SqliteFactory);
//
// Tests that check state after a restart call Reopen(), so a durable backend
// proves that the state survives close + open.

#include <algorithm>
#include <atomic>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "coordinator/kv/kv_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddp::kv {

// Readable failure messages for the value types (bytes hex-escaped).
inline void PrintTo(const KeyValue& kv, std::ostream* os) {
  *os << "{ns='" << absl::CHexEscape(kv.ns) << "' key='" << absl::CHexEscape(kv.key) << "' value='"
      << absl::CHexEscape(kv.value) << "' create=" << kv.create_revision
      << " mod=" << kv.mod_revision << " version=" << kv.version << " lease=" << kv.lease << "}";
}
inline void PrintTo(const Event& event, std::ostream* os) {
  *os << (event.type == EventType::kPut ? "PUT " : "DELETE ");
  PrintTo(event.kv, os);
}
inline void PrintTo(const LeaseRecord& lease, std::ostream* os) {
  *os << "{lease " << lease.id << " ttl_ms=" << lease.ttl_ms << "}";
}

namespace conformance {

inline KeyValue Kv(std::string ns, std::string key, std::string value, Revision create,
                   Revision mod, int64_t version, LeaseId lease = 0) {
  KeyValue kv;
  kv.ns = std::move(ns);
  kv.key = std::move(key);
  kv.value = std::move(value);
  kv.create_revision = create;
  kv.mod_revision = mod;
  kv.version = version;
  kv.lease = lease;
  return kv;
}

inline Event PutEvent(const KeyValue& kv) { return Event{EventType::kPut, kv}; }

inline Event DeleteEvent(std::string ns, std::string key, Revision revision) {
  Event event;
  event.type = EventType::kDelete;
  event.kv.ns = std::move(ns);
  event.kv.key = std::move(key);
  event.kv.mod_revision = revision;
  return event;
}

// A batch at `revision` that puts `kvs` (each with its own event, in order).
inline KvWriteBatch PutBatch(Revision revision, std::vector<KeyValue> kvs) {
  KvWriteBatch batch;
  batch.revision = revision;
  for (const KeyValue& kv : kvs) batch.events.push_back(PutEvent(kv));
  batch.upserts = std::move(kvs);
  return batch;
}

// A batch at `revision` putting one key with a fresh record (create = mod =
// revision).
inline KvWriteBatch PutOne(Revision revision, std::string ns, std::string key, std::string value) {
  return PutBatch(revision,
                  {Kv(std::move(ns), std::move(key), std::move(value), revision, revision, 1)});
}

inline std::vector<KeyValue> SortedKeys(std::vector<KeyValue> keys) {
  std::sort(keys.begin(), keys.end(), [](const KeyValue& a, const KeyValue& b) {
    return std::tie(a.ns, a.key) < std::tie(b.ns, b.key);
  });
  return keys;
}

inline std::vector<KeyValue> SortedKeys(const KeySpace& space) {
  std::vector<KeyValue> keys;
  space.ForEach([&](const KeyValue& kv) { keys.push_back(kv); });
  return SortedKeys(std::move(keys));
}

inline std::vector<LeaseRecord> SortedLeases(std::vector<LeaseRecord> leases) {
  std::sort(leases.begin(), leases.end(),
            [](const LeaseRecord& a, const LeaseRecord& b) { return a.id < b.id; });
  return leases;
}

inline std::vector<std::string> KeysOf(const std::vector<Event>& events) {
  std::vector<std::string> keys;
  for (const Event& event : events) keys.push_back(event.kv.key);
  return keys;
}

inline std::vector<Revision> RevisionsOf(const std::vector<Event>& events) {
  std::vector<Revision> revisions;
  for (const Event& event : events) revisions.push_back(event.revision());
  return revisions;
}

}  // namespace conformance

template <typename Factory>
class KvBackendConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<KvBackend>> backend = factory_.Open();
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(backend).value();
  }

  // Closes and reopens the storage; durable backends must keep everything.
  void Reopen() {
    absl::StatusOr<std::unique_ptr<KvBackend>> backend = factory_.Reopen(std::move(backend_));
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(backend).value();
  }

  PersistedKvState MustLoad() {
    absl::StatusOr<PersistedKvState> state = backend_->Load();
    EXPECT_TRUE(state.ok()) << state.status();
    return state.ok() ? *std::move(state) : PersistedKvState{};
  }

  std::vector<Event> MustRead(const std::string& ns, const std::string& prefix, Revision from,
                              size_t max_events = 1000) {
    absl::StatusOr<std::vector<Event>> events = backend_->ReadEvents(ns, prefix, from, max_events);
    EXPECT_TRUE(events.ok()) << events.status();
    return events.ok() ? *std::move(events) : std::vector<Event>{};
  }

  // Commits one single-put batch per revision in [first, last], key
  // "k<revision>".
  void CommitRevisions(Revision first, Revision last) {
    for (Revision r = first; r <= last; ++r) {
      ASSERT_TRUE(
          backend_->Commit(conformance::PutOne(r, "ns", "k" + std::to_string(r), "v")).ok());
    }
  }

  Factory factory_;
  std::unique_ptr<KvBackend> backend_;
};

TYPED_TEST_SUITE_P(KvBackendConformanceTest);

#include "coordinator/storage/kv_backend_conformance_tests.inc"

}  // namespace ddp::kv

#endif  // DDP_COORDINATOR_STORAGE_KV_BACKEND_CONFORMANCE_H_
