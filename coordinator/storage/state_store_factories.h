#ifndef DDP_COORDINATOR_STORAGE_STATE_STORE_FACTORIES_H_
#define DDP_COORDINATOR_STORAGE_STATE_STORE_FACTORIES_H_

// Conformance-suite factories for the state stores, which pass both the
// KvBackend and the JobStateStore suites: `Interface` is the one under test.
// Open() makes a store; Reopen() closes it and opens it again (the SQLite
// store from its file, in a directory of its own under TEST_TMPDIR; the
// memory store keeps the same object: there is nothing to reopen from).

#include <stdlib.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/storage/memory_state_store.h"
#include "coordinator/storage/sqlite_state_store.h"
#include "gtest/gtest.h"

namespace ddp::storage::testing {

template <typename Interface>
class MemoryStateFactory {
 public:
  absl::StatusOr<std::unique_ptr<Interface>> Open() {
    return std::unique_ptr<Interface>(std::make_unique<MemoryStateStore>());
  }
  absl::StatusOr<std::unique_ptr<Interface>> Reopen(std::unique_ptr<Interface> store) {
    return store;
  }
};

template <typename Interface>
class SqliteStateFactory {
 public:
  SqliteStateFactory() {
    const char* root = getenv("TEST_TMPDIR");
    std::string pattern = std::string(root != nullptr ? root : "/tmp") + "/stateconfXXXXXX";
    EXPECT_NE(mkdtemp(pattern.data()), nullptr) << "mkdtemp failed for " << pattern;
    path_ = pattern + "/coordinator.db";
  }
  absl::StatusOr<std::unique_ptr<Interface>> Open() {
    kv::SqliteKvBackendOptions options;
    options.compaction_chunk_events = 2;  // exercise chunked compaction
    absl::StatusOr<std::unique_ptr<SqliteStateStore>> store =
        SqliteStateStore::Open(path_, options);
    if (!store.ok()) return store.status();
    return std::unique_ptr<Interface>(std::move(store).value());
  }
  absl::StatusOr<std::unique_ptr<Interface>> Reopen(std::unique_ptr<Interface> store) {
    store.reset();
    return Open();
  }

 private:
  std::string path_;
};

}  // namespace ddp::storage::testing

#endif  // DDP_COORDINATOR_STORAGE_STATE_STORE_FACTORIES_H_
