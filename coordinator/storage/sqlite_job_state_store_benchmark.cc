// Apply latency of SqliteJobStateStore on a real file (WAL, synchronous=FULL;
// every Apply is one transaction, one fsync):
//   BM_ApplyJoin             one join: counters + one node record, into a job
//                            that already has 4,096 nodes
//   BM_ApplyGenerationChange a new generation: the job record (with 64
//                            failures and 16 exclusions) + all N nodes' ranks
//                            in one Apply (N = 1,024 and 4,096)
//   BM_LoadAll               restart: LoadAll of one job with 4,096 nodes
//
//   bazel run -c opt //coordinator/storage:sqlite_job_state_store_benchmark
// The file lives in $DDP_BENCH_DB_DIR (default: $TMPDIR, then /tmp), so
// measure on the disk the coordinator will use.

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "coordinator/storage/sqlite_job_state_store.h"

namespace ddp::rendezvous {
namespace {

std::string DbDir() {
  const char* dir = getenv("DDP_BENCH_DB_DIR");
  if (dir == nullptr) dir = getenv("TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// A fresh store in its own directory, removed with the fixture.
class BenchStore {
 public:
  explicit BenchStore(benchmark::State& state) {
    dir_ = DbDir() + "/jobbenchXXXXXX";
    if (mkdtemp(dir_.data()) == nullptr) {
      state.SkipWithError("mkdtemp failed");
      return;
    }
    path_ = dir_ + "/jobs.db";
    absl::StatusOr<std::unique_ptr<SqliteJobStateStore>> store = SqliteJobStateStore::Open(path_);
    if (!store.ok()) {
      state.SkipWithError(store.status().ToString().c_str());
      return;
    }
    store_ = std::move(store).value();
  }
  ~BenchStore() {
    store_.reset();
    for (const char* suffix : {"-wal", "-shm", ""}) {
      std::remove((path_ + suffix).c_str());
    }
    rmdir(dir_.c_str());
  }
  SqliteJobStateStore* get() { return store_.get(); }

 private:
  std::string dir_;
  std::string path_;
  std::unique_ptr<SqliteJobStateStore> store_;
};

NodeRecord Node(int n, int group_rank) {
  NodeRecord node;
  node.node_id = absl::StrCat("node-", n);
  node.incarnation = 1000 + n;
  node.nproc = 8;
  node.address = absl::StrCat("10.0.", n / 256, ".", n % 256);
  node.group_rank = group_rank;
  node.global_rank_offset = int64_t{group_rank} * 8;
  node.join_seq = n + 1;
  return node;
}

JobRecord Record(Generation generation) {
  JobRecord record;
  record.job_id = "bench-job";
  record.settings.max_nodes = 4096;
  record.state = JobState::kStarting;
  record.generation = generation;
  for (int i = 0; i < 64; ++i) {
    FailureInfo failure;
    failure.node_id = absl::StrCat("node-", i);
    failure.message = std::string(200, 'm');
    record.failures.push_back(failure);
  }
  for (int i = 0; i < 16; ++i) {
    record.excluded_nodes.push_back(absl::StrCat("excluded-", i));
  }
  record.master.nccl_unique_id = std::string(kNcclUniqueIdBytes, '\1');
  return record;
}

// Creates the job with `nodes` nodes in one Apply.
bool CreateJob(benchmark::State& state, JobStateStore& store, int nodes) {
  JobChanges create;
  create.job_id = "bench-job";
  create.job = Record(1);
  for (int n = 0; n < nodes; ++n) create.upserted_nodes.push_back(Node(n, n));
  absl::Status status = store.Apply(create);
  if (!status.ok()) state.SkipWithError(status.ToString().c_str());
  return status.ok();
}

void BM_ApplyJoin(benchmark::State& state) {
  constexpr int kExistingNodes = 4096;
  BenchStore store(state);
  if (store.get() == nullptr || !CreateJob(state, *store.get(), kExistingNodes)) return;
  // Joins cycle through 4,096 fresh ids, prebuilt so only Apply is timed.
  std::vector<JobChanges> joins;
  for (int n = 0; n < 4096; ++n) {
    JobChanges join;
    join.job_id = "bench-job";
    join.counters = JobCounters{n + 1, static_cast<uint64_t>(n + 2)};
    join.upserted_nodes = {Node(kExistingNodes + n, -1)};
    joins.push_back(std::move(join));
  }
  size_t next = 0;
  for (auto _ : state) {
    absl::Status status = store.get()->Apply(joins[next++ % joins.size()]);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
  }
  state.counters["applies_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_ApplyGenerationChange(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  BenchStore store(state);
  if (store.get() == nullptr || !CreateJob(state, *store.get(), nodes)) return;
  // Two alternating generations whose rank tables differ for every node.
  std::vector<JobChanges> generations;
  for (int g = 0; g < 2; ++g) {
    JobChanges change;
    change.job_id = "bench-job";
    change.job = Record(2 + g);
    change.counters = JobCounters{g + 10, static_cast<uint64_t>(nodes + 1)};
    for (int n = 0; n < nodes; ++n) {
      change.upserted_nodes.push_back(Node(n, g == 0 ? nodes - 1 - n : n));
    }
    generations.push_back(std::move(change));
  }
  size_t next = 0;
  for (auto _ : state) {
    absl::Status status = store.get()->Apply(generations[next++ % 2]);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
  }
  state.counters["node_rows_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * nodes, benchmark::Counter::kIsRate);
}

void BM_LoadAll(benchmark::State& state) {
  BenchStore store(state);
  if (store.get() == nullptr || !CreateJob(state, *store.get(), 4096)) return;
  for (auto _ : state) {
    absl::StatusOr<std::vector<JobSnapshot>> all = store.get()->LoadAll();
    if (!all.ok() || all->size() != 1 || (*all)[0].nodes.size() != 4096) {
      state.SkipWithError("LoadAll failed or returned the wrong state");
      break;
    }
    benchmark::DoNotOptimize(all);
  }
}

BENCHMARK(BM_ApplyJoin)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ApplyGenerationChange)
    ->Arg(1024)
    ->Arg(4096)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LoadAll)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ddp::rendezvous
