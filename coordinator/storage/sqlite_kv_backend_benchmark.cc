// Commit throughput of SqliteKvBackend on a real file (WAL, synchronous=FULL):
// batches of 1, 16 and 256 puts of 100-byte values, one Commit (one fsync) per
// batch.
//
//   bazel run -c opt //coordinator/storage:sqlite_kv_backend_benchmark
//   (Google Benchmark flags such as --benchmark_min_time=2 go after `--`.)
// Reports puts_per_s and commits_per_s. The file lives in $DDP_BENCH_DB_DIR
// (default: $TMPDIR, then /tmp), so measure on the disk the coordinator will
// use.

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "coordinator/storage/sqlite_kv_backend.h"

namespace ddp::kv {
namespace {

std::string DbDir() {
  const char* dir = getenv("DDP_BENCH_DB_DIR");
  if (dir == nullptr) dir = getenv("TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

void BM_CommitPuts(benchmark::State& state) {
  const int puts_per_batch = static_cast<int>(state.range(0));
  std::string pattern = DbDir() + "/kvbenchXXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  const std::string path = pattern + "/kv.db";
  absl::StatusOr<std::unique_ptr<SqliteKvBackend>> backend = SqliteKvBackend::Open(path);
  if (!backend.ok()) {
    state.SkipWithError(backend.status().ToString().c_str());
    return;
  }
  const std::string value(100, 'v');
  Revision revision = 0;
  int64_t key_counter = 0;
  for (auto _ : state) {
    state.PauseTiming();
    KvWriteBatch batch;
    batch.revision = ++revision;
    for (int i = 0; i < puts_per_batch; ++i) {
      // Keys cycle through 10,000 names, so most puts overwrite like a real
      // workload.
      KeyValue kv{"bench",  absl::StrFormat("worker/%05d", key_counter++ % 10000),
                  value,    revision,
                  revision, 1,
                  0};
      batch.events.push_back(Event{EventType::kPut, kv});
      batch.upserts.push_back(std::move(kv));
    }
    state.ResumeTiming();
    absl::Status status = (*backend)->Commit(batch);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
  }
  state.counters["puts_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * puts_per_batch, benchmark::Counter::kIsRate);
  state.counters["commits_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  backend->reset();
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  std::remove(path.c_str());
  rmdir(pattern.c_str());
}

BENCHMARK(BM_CommitPuts)->Arg(1)->Arg(16)->Arg(256)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ddp::kv
