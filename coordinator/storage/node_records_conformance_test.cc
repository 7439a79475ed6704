// Runs the node-records conformance suite against the coordinator's state
// stores in memory and on SQLite (etcd: etcd/etcd_state_store_test.cc).

#include "coordinator/storage/node_records_conformance.h"

#include "coordinator/commit/state_store.h"
#include "coordinator/storage/state_store_factories.h"

namespace ddp::storage::conformance {
namespace {

using MemoryStateFactory = storage::testing::MemoryStateFactory<commit::StateStore>;
using SqliteStateFactory = storage::testing::SqliteStateFactory<commit::StateStore>;

INSTANTIATE_TYPED_TEST_SUITE_P(MemoryState, NodeRecordsConformanceTest, MemoryStateFactory);
INSTANTIATE_TYPED_TEST_SUITE_P(SqliteState, NodeRecordsConformanceTest, SqliteStateFactory);

}  // namespace
}  // namespace ddp::storage::conformance
