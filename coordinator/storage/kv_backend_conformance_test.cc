// Runs the KvBackend conformance suite against every implementation: the KV
// backends and the state stores (which are KV backends too).

#include "coordinator/storage/kv_backend_conformance.h"

#include <stdlib.h>

#include <memory>
#include <string>

#include "common/status_macros.h"
#include "coordinator/storage/memory_kv_backend.h"
#include "coordinator/storage/sqlite_kv_backend.h"
#include "coordinator/storage/state_store_factories.h"

namespace ddp::kv {
namespace {

// Volatile: Reopen keeps the same object (there is nothing to reopen from).
class InMemoryFactory {
 public:
  absl::StatusOr<std::unique_ptr<KvBackend>> Open() {
    return std::unique_ptr<KvBackend>(std::make_unique<InMemoryKvBackend>());
  }
  absl::StatusOr<std::unique_ptr<KvBackend>> Reopen(std::unique_ptr<KvBackend> backend) {
    return backend;
  }
};

// Durable: each test gets its own directory under TEST_TMPDIR; Reopen destroys
// the backend (closing the file) and opens the file again.
class SqliteFactory {
 public:
  SqliteFactory() {
    const char* root = getenv("TEST_TMPDIR");
    std::string pattern = std::string(root != nullptr ? root : "/tmp") + "/kvconfXXXXXX";
    const char* dir = mkdtemp(pattern.data());
    EXPECT_NE(dir, nullptr) << "mkdtemp failed for " << pattern;
    path_ = pattern + "/kv.db";
  }
  absl::StatusOr<std::unique_ptr<KvBackend>> Open() {
    SqliteKvBackendOptions options;
    options.compaction_chunk_events = 2;  // exercise chunked compaction
    DDP_ASSIGN_OR_RETURN(std::unique_ptr<SqliteKvBackend> backend,
                         SqliteKvBackend::Open(path_, options));
    return std::unique_ptr<KvBackend>(std::move(backend));
  }
  absl::StatusOr<std::unique_ptr<KvBackend>> Reopen(std::unique_ptr<KvBackend> backend) {
    backend.reset();
    return Open();
  }

 private:
  std::string path_;
};

using MemoryStateFactory = storage::testing::MemoryStateFactory<KvBackend>;
using SqliteStateFactory = storage::testing::SqliteStateFactory<KvBackend>;

INSTANTIATE_TYPED_TEST_SUITE_P(InMemory, KvBackendConformanceTest, InMemoryFactory);
INSTANTIATE_TYPED_TEST_SUITE_P(MemoryState, KvBackendConformanceTest, MemoryStateFactory);
INSTANTIATE_TYPED_TEST_SUITE_P(SqliteState, KvBackendConformanceTest, SqliteStateFactory);
INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, KvBackendConformanceTest, SqliteFactory);

}  // namespace
}  // namespace ddp::kv
