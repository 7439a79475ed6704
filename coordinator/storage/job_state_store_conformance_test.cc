// Runs the JobStateStore conformance suite against every implementation: the
// in-memory store, the state stores (the coordinator's), and the jobs.db of
// earlier releases (still read to import it).

#include "coordinator/storage/job_state_store_conformance.h"

#include <stdlib.h>

#include <memory>
#include <string>

#include "common/status_macros.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/storage/memory_state_store.h"
#include "coordinator/storage/sqlite_job_state_store.h"
#include "coordinator/storage/sqlite_state_store.h"

namespace ddp::rendezvous {
namespace {

// Volatile: Reopen keeps the same object (there is nothing to reopen from).
class InMemoryFactory {
 public:
  absl::StatusOr<std::unique_ptr<JobStateStore>> Open() {
    return std::unique_ptr<JobStateStore>(std::make_unique<InMemoryJobStateStore>());
  }
  absl::StatusOr<std::unique_ptr<JobStateStore>> Reopen(std::unique_ptr<JobStateStore> store) {
    return store;
  }
};

// Durable: each test gets its own directory under TEST_TMPDIR; Reopen destroys
// the store (closing the file) and opens the file again.
class SqliteFactory {
 public:
  SqliteFactory() {
    const char* root = getenv("TEST_TMPDIR");
    std::string pattern = std::string(root != nullptr ? root : "/tmp") + "/jobconfXXXXXX";
    const char* dir = mkdtemp(pattern.data());
    EXPECT_NE(dir, nullptr) << "mkdtemp failed for " << pattern;
    path_ = pattern + "/jobs.db";
  }
  absl::StatusOr<std::unique_ptr<JobStateStore>> Open() {
    DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteJobStateStore> store,
                         SqliteJobStateStore::Open(path_));
    return std::unique_ptr<JobStateStore>(std::move(store));
  }
  absl::StatusOr<std::unique_ptr<JobStateStore>> Reopen(std::unique_ptr<JobStateStore> store) {
    store.reset();
    return Open();
  }

 private:
  std::string path_;
};

class MemoryStateFactory {
 public:
  absl::StatusOr<std::unique_ptr<JobStateStore>> Open() {
    return std::unique_ptr<JobStateStore>(std::make_unique<storage::MemoryStateStore>());
  }
  absl::StatusOr<std::unique_ptr<JobStateStore>> Reopen(std::unique_ptr<JobStateStore> store) {
    return store;
  }
};

class SqliteStateFactory {
 public:
  SqliteStateFactory() {
    const char* root = getenv("TEST_TMPDIR");
    std::string pattern = std::string(root != nullptr ? root : "/tmp") + "/stateconfXXXXXX";
    const char* dir = mkdtemp(pattern.data());
    EXPECT_NE(dir, nullptr) << "mkdtemp failed for " << pattern;
    path_ = pattern + "/coordinator.db";
  }
  absl::StatusOr<std::unique_ptr<JobStateStore>> Open() {
    DDP_ASSIGN_OR_RETURN(std::unique_ptr<storage::SqliteStateStore> store,
                         storage::SqliteStateStore::Open(path_));
    return std::unique_ptr<JobStateStore>(std::move(store));
  }
  absl::StatusOr<std::unique_ptr<JobStateStore>> Reopen(std::unique_ptr<JobStateStore> store) {
    store.reset();
    return Open();
  }

 private:
  std::string path_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(InMemory, JobStateStoreConformanceTest, InMemoryFactory);
INSTANTIATE_TYPED_TEST_SUITE_P(MemoryState, JobStateStoreConformanceTest, MemoryStateFactory);
INSTANTIATE_TYPED_TEST_SUITE_P(SqliteState, JobStateStoreConformanceTest, SqliteStateFactory);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, JobStateStoreConformanceTest, SqliteFactory);

}  // namespace
}  // namespace ddp::rendezvous
