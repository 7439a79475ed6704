// Runs the JobStateStore conformance suite against every implementation: the
// in-memory store and the state stores (the coordinator's).

#include "coordinator/storage/job_state_store_conformance.h"

#include <stdlib.h>

#include <memory>
#include <string>

#include "common/status_macros.h"
#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/storage/memory_state_store.h"
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

}  // namespace
}  // namespace ddp::rendezvous
