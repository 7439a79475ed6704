// What storing job events costs the job part of a commit: batches of node
// joins as the rendezvous core writes them (per join: one node record, the
// job's counters and, with events, one NODE_JOINED event; old events trimmed
// to the 8,192 a job keeps), committed to SqliteStateStore on a real file (WAL,
// synchronous=FULL), one transaction (one fsync) per batch.
//
//   bazel run //coordinator/storage:job_event_write_benchmark
//   (Google Benchmark flags such as --benchmark_min_time=2 go after `--`.)
// Arguments: joins per batch, then 0 (no events: the previous release's
// write) or 1 (with events). Reports the time per batch and joins_per_s. The file
// lives in $DDP_BENCH_DB_DIR (default: $TMPDIR, then /tmp).

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "coordinator/storage/sqlite_state_store.h"

namespace ddp::storage {
namespace {

constexpr int kNodes = 4096;
constexpr int64_t kRetainedEvents = 8192;  // RendezvousLimits::max_retained_events

std::string DbDir() {
  const char* dir = getenv("DDP_BENCH_DB_DIR");
  if (dir == nullptr) dir = getenv("TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

void BM_JoinBatches(benchmark::State& state) {
  const int joins_per_batch = static_cast<int>(state.range(0));
  const bool with_events = state.range(1) != 0;
  std::string pattern = DbDir() + "/eventbenchXXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  const std::string path = pattern + "/coordinator.db";
  absl::StatusOr<std::unique_ptr<SqliteStateStore>> store = SqliteStateStore::Open(path);
  if (!store.ok()) {
    state.SkipWithError(store.status().ToString().c_str());
    return;
  }
  rendezvous::JobRecord record =
      rendezvous::NewJobRecord("big", rendezvous::DefaultJobSettings(), absl::Time());
  record.mutable_settings()->set_min_nodes(kNodes);
  record.mutable_settings()->set_max_nodes(kNodes);
  record.mutable_settings()->set_nproc_per_node(8);
  rendezvous::JobChanges created;
  created.job_id = "big";
  created.job = record;
  if (absl::Status s = (*store)->Apply(created); !s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  int64_t joins = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<rendezvous::JobChanges> batch;
    for (int i = 0; i < joins_per_batch; ++i, ++joins) {
      rendezvous::JobChanges join;
      join.job_id = "big";
      rendezvous::NodeRecord node = rendezvous::NewNodeRecord("");
      node.set_node_id(absl::StrCat("node-", joins % kNodes));
      node.set_incarnation(static_cast<uint64_t>(joins + 1));
      node.set_nproc(8);
      node.set_address(absl::StrCat("10.0.", (joins % kNodes) / 256, ".", joins % 256));
      node.set_join_seq(static_cast<uint64_t>(joins + 1));
      join.upserted_nodes.push_back(node);
      const int64_t index = joins + 1;
      join.counters = rendezvous::JobCounters{index, static_cast<uint64_t>(joins + 2)};
      if (with_events) {
        rendezvous::JobEvent event;
        event.set_job_id("big");
        event.set_index(index);
        rendezvous::SetEventTime(absl::Now(), &event);
        event.set_type(rendezvous::JobEvent::NODE_JOINED);
        event.set_node_id(node.node_id());
        event.set_message(absl::StrCat("node '", node.node_id(), "' joined (8 processes, ",
                                       joins % kNodes + 1, " of ", kNodes, " registered)"));
        join.appended_events.push_back(event);
        if (index > kRetainedEvents) join.drop_events_before = index - kRetainedEvents + 1;
      }
      batch.push_back(std::move(join));
    }
    state.ResumeTiming();
    absl::Status status = (*store)->ApplyBatch(batch);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
  }
  const double total = static_cast<double>(state.iterations()) * joins_per_batch;
  state.counters["joins_per_s"] = benchmark::Counter(total, benchmark::Counter::kIsRate);
  store->reset();
  for (const char* suffix : {"-wal", "-shm", ""}) std::remove((path + suffix).c_str());
  rmdir(pattern.c_str());
}

BENCHMARK(BM_JoinBatches)
    ->ArgsProduct({{1, 64, 4096}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ddp::storage
