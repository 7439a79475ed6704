#ifndef DDP_COORDINATOR_KV_TESTING_BACKEND_FACTORIES_H_
#define DDP_COORDINATOR_KV_TESTING_BACKEND_FACTORIES_H_

// One factory per KvBackend implementation, for the typed conformance suite:
// each makes a fresh, empty backend (SQLite: in a new file under TEST_TMPDIR).

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "coordinator/storage/memory_kv_backend.h"
#include "coordinator/storage/sqlite_kv_backend.h"
#include "gtest/gtest.h"

namespace ddp::kv::testing {

struct InMemoryBackendFactory {
  static constexpr const char* kName = "InMemory";
  std::unique_ptr<KvBackend> Make() { return std::make_unique<InMemoryKvBackend>(); }
};

struct SqliteBackendFactory {
  static constexpr const char* kName = "Sqlite";
  std::unique_ptr<KvBackend> Make() {
    static std::atomic<int> counter{0};
    const char* dir = std::getenv("TEST_TMPDIR");
    const std::string path = absl::StrCat(dir ? dir : "/tmp", "/kv_conformance_", getpid(), "_",
                                          counter.fetch_add(1), ".db");
    auto backend = SqliteKvBackend::Open(path);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return *std::move(backend);
  }
};

}  // namespace ddp::kv::testing

#endif  // DDP_COORDINATOR_KV_TESTING_BACKEND_FACTORIES_H_
