// Runs the JobStateStore conformance suite against every implementation: the
// in-memory store and the state stores (the coordinator's).

#include "coordinator/storage/job_state_store_conformance.h"

#include <stdlib.h>

#include <memory>
#include <string>

#include "coordinator/rendezvous/job_state_store.h"
#include "coordinator/storage/state_store_factories.h"

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

using MemoryStateFactory = storage::testing::MemoryStateFactory<JobStateStore>;
using SqliteStateFactory = storage::testing::SqliteStateFactory<JobStateStore>;

INSTANTIATE_TYPED_TEST_SUITE_P(InMemory, JobStateStoreConformanceTest, InMemoryFactory);
INSTANTIATE_TYPED_TEST_SUITE_P(MemoryState, JobStateStoreConformanceTest, MemoryStateFactory);
INSTANTIATE_TYPED_TEST_SUITE_P(SqliteState, JobStateStoreConformanceTest, SqliteStateFactory);

}  // namespace
}  // namespace ddp::rendezvous
