// kv_bench: closed-loop load against the ddp coordinator and/or etcd 3.4 over
// real gRPC, then a watch fan-out test; prints one table per system.
//
//   kv_bench --ddp 127.0.0.1:29400 --etcd 127.0.0.1:2379 [--duration 3s]
//
// Exit codes: 0 done; 1 a phase failed (error printed); 2 bad flags.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tools/kv_bench/kv_targets.h"
#include "tools/kv_bench/load_runner.h"

ABSL_FLAG(std::string, ddp, "", "Coordinator address HOST:PORT (empty: skip)");
ABSL_FLAG(std::string, etcd, "", "etcd client address HOST:PORT (empty: skip)");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(3),
          "Measured time of each load phase");
ABSL_FLAG(std::string, put_clients, "1,16,256",
          "Concurrent clients of the put phases, comma-separated");
ABSL_FLAG(int, clients, 256, "Concurrent clients of the get and add phases");
ABSL_FLAG(int, value_bytes, 100, "Size of each value written");
ABSL_FLAG(int, watchers, 1000, "Watch streams in the fan-out test (0: skip)");
ABSL_FLAG(int, watch_rounds, 20, "Puts measured in the fan-out test");
ABSL_FLAG(std::string, ddp_namespace, "bench", "Namespace used on ddp");

namespace ddp::kv_bench {
namespace {

constexpr int kGetKeys = 1000;

struct Row {
  std::string phase;
  std::string throughput;
  std::string p50;
  std::string p99;
  std::string note;
};

Row LoadRow(const std::string& phase, const LoadResult& result) {
  Row row{phase, absl::StrFormat("%.0f/s", result.ops_per_second),
          FormatLatency(result.p50), FormatLatency(result.p99), ""};
  if (result.errors > 0) {
    row.note = absl::StrCat(
        result.errors, " errors, first: ", result.first_error.substr(0, 80));
  }
  return row;
}

void PrintTable(const std::string& system, const std::vector<Row>& rows) {
  std::printf("\n== %s ==\n%-28s %12s %10s %10s  %s\n", system.c_str(), "phase",
              "throughput", "p50", "p99/max", "note");
  for (const Row& row : rows) {
    std::printf("%-28s %12s %10s %10s  %s\n", row.phase.c_str(),
                row.throughput.c_str(), row.p50.c_str(), row.p99.c_str(),
                row.note.c_str());
  }
  std::fflush(stdout);
}

// Runs every phase against one system; false if a phase could not run.
bool BenchOne(KvTarget& target, std::unique_ptr<WatchFanout> fanout,
              const std::vector<int>& put_clients) {
  const int max_clients = absl::GetFlag(FLAGS_clients);
  int connections = max_clients;
  for (int n : put_clients) connections = std::max(connections, n);
  target.Connect(connections);
  LoadOptions options;
  options.duration = absl::GetFlag(FLAGS_duration);
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'x');
  std::vector<Row> rows;
  bool ok = true;

  for (int clients : put_clients) {
    options.clients = clients;
    LoadResult result = RunClosedLoop(options, [&](int client, int64_t seq) {
      return target.Put(
          client, absl::StrCat("bench/put", clients, "/", client, "/", seq),
          value);
    });
    rows.push_back(
        LoadRow(absl::StrCat("put (durable), ", clients, " clients"), result));
  }

  for (int i = 0; i < kGetKeys; ++i) {
    if (std::string error = target.Put(0, absl::StrCat("bench/get/", i), value);
        !error.empty()) {
      rows.push_back({"get preload", "-", "-", "-", error});
      ok = false;
      break;
    }
  }
  options.clients = max_clients;
  if (ok) {
    LoadResult result = RunClosedLoop(options, [&](int client, int64_t seq) {
      return target.Get(
          client, absl::StrCat("bench/get/", (client * 7919 + seq) % kGetKeys));
    });
    rows.push_back(
        LoadRow(absl::StrCat("get, ", max_clients, " clients"), result));
  }
  if (target.SupportsAdd()) {
    LoadResult result = RunClosedLoop(options, [&](int client, int64_t) {
      return target.Add(client, "bench/counter");
    });
    rows.push_back(LoadRow(
        absl::StrCat("add (one counter), ", max_clients, " clients"), result));
  } else {
    rows.push_back({"add", "n/a", "-", "-", "no atomic add in this API"});
  }

  const int watchers = absl::GetFlag(FLAGS_watchers);
  if (watchers > 0 && fanout != nullptr) {
    const std::string phase = absl::StrCat("watch fan-out, ", watchers);
    if (std::string start_error = fanout->Start(watchers, "bench/watched");
        !start_error.empty()) {
      rows.push_back({phase, "-", "-", "-", start_error});
      ok = false;
    } else {
      std::vector<absl::Duration> samples;
      std::string error;
      for (int round = 0; round < absl::GetFlag(FLAGS_watch_rounds); ++round) {
        absl::Duration last;
        error = fanout->Round(round, &last);
        if (!error.empty()) break;
        samples.push_back(last);
      }
      Row row{phase, absl::StrCat(samples.size(), " rounds"),
              FormatLatency(Quantile(samples, 0.5)),
              FormatLatency(Quantile(samples, 1.0)),
              "put sent -> last watcher notified"};
      if (!error.empty()) {
        row.note = error;
        ok = false;
      }
      rows.push_back(row);
    }
    fanout->Stop();
  }
  PrintTable(target.name(), rows);
  return ok;
}

}  // namespace
}  // namespace ddp::kv_bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "kv_bench --ddp HOST:PORT --etcd HOST:PORT: durable put/get/add "
      "throughput and latency, and watch fan-out, over gRPC");
  absl::ParseCommandLine(argc, argv);
  std::vector<int> put_clients;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_put_clients), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1 || n > 4096) {
      std::fprintf(stderr,
                   "kv_bench: --put_clients entry '%s' must be 1..4096\n",
                   std::string(part).c_str());
      return 2;
    }
    put_clients.push_back(n);
  }
  if (absl::GetFlag(FLAGS_clients) < 1 || absl::GetFlag(FLAGS_clients) > 4096 ||
      absl::GetFlag(FLAGS_watchers) < 0 ||
      absl::GetFlag(FLAGS_value_bytes) < 0 ||
      absl::GetFlag(FLAGS_duration) <= absl::ZeroDuration()) {
    std::fprintf(stderr,
                 "kv_bench: --clients must be 1..4096, --watchers and "
                 "--value_bytes >= 0, --duration > 0\n");
    return 2;
  }
  const std::string ddp_address = absl::GetFlag(FLAGS_ddp);
  const std::string etcd_address = absl::GetFlag(FLAGS_etcd);
  if (ddp_address.empty() && etcd_address.empty()) {
    std::fprintf(stderr, "kv_bench: give --ddp and/or --etcd\n");
    return 2;
  }
  bool ok = true;
  if (!ddp_address.empty()) {
    const std::string ns = absl::GetFlag(FLAGS_ddp_namespace);
    auto target = ddp::kv_bench::NewDdpTarget(ddp_address, ns);
    ok &= ddp::kv_bench::BenchOne(
        *target, ddp::kv_bench::NewDdpWatchFanout(ddp_address, ns),
        put_clients);
  }
  if (!etcd_address.empty()) {
    auto target = ddp::kv_bench::NewEtcdTarget(etcd_address);
    ok &= ddp::kv_bench::BenchOne(
        *target, ddp::kv_bench::NewEtcdWatchFanout(etcd_address), put_clients);
  }
  return ok ? 0 : 1;
}
