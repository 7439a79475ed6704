// kv_bench: closed-loop load against the ddp coordinator and/or etcd 3.4 over
// real gRPC (callback API, clients multiplexed over a few connections), then a
// watch fan-out test; prints one table per system, with the CPU that one
// operation cost the load generator and (given --ddp_pid / --etcd_pid) the
// server.
//
//   kv_bench --ddp 127.0.0.1:29400 --etcd 127.0.0.1:2379 [--duration 3s]
//
// Exit codes: 0 done; 1 a phase failed (error printed); 2 bad flags.

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/proc_stats.h"
#include "common/tls_files.h"
#include "common/token_file.h"
#include "tools/kv_bench/grpc_channels.h"
#include "tools/kv_bench/kv_targets.h"
#include "tools/kv_bench/load_runner.h"
#include "tools/kv_bench/rest_target.h"

ABSL_FLAG(std::string, ddp, "", "Coordinator address HOST:PORT (empty: skip)");
ABSL_FLAG(std::string, etcd, "", "etcd client address HOST:PORT (empty: skip)");
ABSL_FLAG(std::string, rest, "",
          "The coordinator's HTTP listener HOST:PORT: the same load over the REST API (empty: "
          "skip; its CPU is --ddp_pid's)");
ABSL_FLAG(int, ddp_pid, 0, "PID of the coordinator, to report its CPU per operation (0: not)");
ABSL_FLAG(int, etcd_pid, 0, "PID of etcd, to report its CPU per operation (0: not)");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(3), "Measured time of each load phase");
ABSL_FLAG(std::string, put_clients, "1,16,256",
          "Concurrent clients of the put phases, comma-separated");
ABSL_FLAG(int, clients, 256, "Concurrent clients of the get and add phases");
ABSL_FLAG(int, connections, 16,
          "TCP connections the clients are spread over (at most one per "
          "client)");
ABSL_FLAG(absl::Duration, deadline, absl::ZeroDuration(),
          "Deadline of each load call; 0: none, as etcd's own benchmark tool "
          "does (a deadline costs a timer per call on both sides)");
ABSL_FLAG(int, value_bytes, 100, "Size of each value written");
ABSL_FLAG(std::string, watchers, "1000",
          "Watch streams of the fan-out tests, comma-separated (one test each; 0: skip)");
ABSL_FLAG(int, watch_rounds, 20, "Puts measured in the fan-out test");
ABSL_FLAG(std::string, phases, "put,get,add,watch",
          "Phases to run, comma-separated: put, get, add, watch");
ABSL_FLAG(std::string, ddp_namespace, "bench", "Namespace used on ddp");
ABSL_FLAG(bool, ddp_put_stream, true,
          "Also measure ddp's puts on KeyValueService.PutStream (one stream per connection; "
          "row 'ddp-stream', put phases only)");
ABSL_FLAG(std::string, ddp_tls_ca, "", "TLS to the coordinator: its CA (PEM)");
ABSL_FLAG(std::string, ddp_tls_cert, "", "mTLS: client certificate (PEM)");
ABSL_FLAG(std::string, ddp_tls_key, "", "mTLS: client key (PEM)");
ABSL_FLAG(std::string, ddp_token_file, "", "Bearer token for a coordinator with authorization");

namespace ddp::kv_bench {
namespace {

constexpr int kGetKeys = 1000;

struct Row {
  std::string phase;
  std::string throughput;
  std::string p50;
  std::string p99;
  std::string client_cpu;
  std::string server_cpu;
  std::string note;
};

// CPU of this process and of the server under test over a measured window.
class CpuWindow {
 public:
  explicit CpuWindow(pid_t server_pid) : server_pid_(server_pid) {}
  void Start() {
    client_start_ = ReadProcessCpuTime(getpid());
    if (server_pid_ != 0) server_start_ = ReadProcessCpuTime(server_pid_);
  }
  void End() {
    client_end_ = ReadProcessCpuTime(getpid());
    if (server_pid_ != 0) server_end_ = ReadProcessCpuTime(server_pid_);
  }
  // "12.3 us" of CPU per operation, or "-" when unknown.
  static std::string PerOp(const std::optional<absl::StatusOr<absl::Duration>>& a,
                           const std::optional<absl::StatusOr<absl::Duration>>& b, int64_t ops) {
    if (!a || !b || !a->ok() || !b->ok() || ops <= 0) return "-";
    return absl::StrFormat("%.1f us", absl::ToDoubleMicroseconds(**b - **a) / ops);
  }
  std::string ClientPerOp(int64_t ops) const { return PerOp(client_start_, client_end_, ops); }
  std::string ServerPerOp(int64_t ops) const { return PerOp(server_start_, server_end_, ops); }

 private:
  const pid_t server_pid_;
  std::optional<absl::StatusOr<absl::Duration>> client_start_, client_end_, server_start_,
      server_end_;
};

// Runs one phase; the operation counted is every completed call.
Row RunPhase(const std::string& phase, int clients, pid_t server_pid, const AsyncOperation& op) {
  CpuWindow cpu(server_pid);
  LoadOptions options;
  options.clients = clients;
  options.duration = absl::GetFlag(FLAGS_duration);
  options.on_window_start = [&] { cpu.Start(); };
  options.on_window_end = [&] { cpu.End(); };
  const LoadResult result = RunClosedLoop(options, op);
  // Operations that completed in the window, errors included, cost CPU too.
  const int64_t calls = result.ops + result.errors;
  Row row{phase,
          absl::StrFormat("%.0f/s", result.ops_per_second),
          FormatLatency(result.p50),
          FormatLatency(result.p99),
          cpu.ClientPerOp(calls),
          cpu.ServerPerOp(calls),
          ""};
  if (result.errors > 0) {
    row.note = absl::StrCat(result.errors, " errors, first: ", result.first_error.substr(0, 80));
  }
  if (result.stuck_clients > 0) {
    // Calls are still in flight on the targets' channels: nothing may run or
    // be destroyed after this.
    std::printf(
        "%s: %d calls did not end within %s of the window; the "
        "server hangs\n",
        phase.c_str(), result.stuck_clients, absl::FormatDuration(options.drain_timeout).c_str());
    std::fflush(stdout);
    std::_Exit(1);
  }
  return row;
}

void PrintTable(const std::string& system, const std::vector<Row>& rows) {
  std::printf("\n== %s ==\n%-30s %12s %10s %10s %10s %10s  %s\n", system.c_str(), "phase",
              "throughput", "p50", "p99/max", "cpu/op cl", "cpu/op srv", "note");
  for (const Row& row : rows) {
    std::printf("%-30s %12s %10s %10s %10s %10s  %s\n", row.phase.c_str(), row.throughput.c_str(),
                row.p50.c_str(), row.p99.c_str(), row.client_cpu.c_str(), row.server_cpu.c_str(),
                row.note.c_str());
  }
  std::fflush(stdout);
}

// One operation, waited for (preloading).
std::string CallOnce(const std::function<void(OperationDone&)>& start) {
  struct Waiter final : OperationDone {
    absl::Notification finished;
    std::string error;
    void Done(int, absl::string_view e) override {
      error = std::string(e);
      finished.Notify();
    }
  } waiter;
  start(waiter);
  waiter.finished.WaitForNotification();
  return waiter.error;
}

// Runs every selected phase against one system; false if a phase failed.
// The server's resident memory per watch stream: VmRSS once all `watchers`
// streams were registered and notified, minus VmRSS before they were opened,
// divided by their number ("" without a PID or when /proc cannot be read).
std::string RssPerWatcher(pid_t pid, int64_t rss_before, int watchers) {
  if (pid == 0 || rss_before < 0 || watchers == 0) return "";
  const absl::StatusOr<int64_t> rss_after = ReadProcessRssBytes(pid);
  if (!rss_after.ok()) return "";
  return absl::StrFormat("; server RSS +%.1f KiB per watcher",
                         static_cast<double>(*rss_after - rss_before) / 1024.0 / watchers);
}

// One fan-out test: `watchers` streams on one key, then rounds of one put.
Row RunFanout(WatchFanout& fanout, int watchers, pid_t pid, bool& ok) {
  const std::string phase = absl::StrCat("watch fan-out, ", watchers);
  int64_t rss_before = -1;
  if (pid != 0) {
    if (absl::StatusOr<int64_t> rss = ReadProcessRssBytes(pid); rss.ok()) rss_before = *rss;
  }
  Row row{phase, "-", "-", "-", "-", "-", ""};
  if (std::string start_error = fanout.Start(watchers, absl::StrCat("bench/watched", watchers));
      !start_error.empty()) {
    row.note = start_error;
    ok = false;
  } else {
    std::vector<absl::Duration> samples;
    std::string error;
    CpuWindow cpu(pid);
    cpu.Start();
    for (int round = 0; round < absl::GetFlag(FLAGS_watch_rounds); ++round) {
      absl::Duration last;
      error = fanout.Round(round, &last);
      if (!error.empty()) break;
      samples.push_back(last);
    }
    cpu.End();
    // The CPU columns: per notification (one watcher told of one put).
    const int64_t notifications = static_cast<int64_t>(samples.size()) * watchers;
    row = Row{phase,
              absl::StrCat(samples.size(), " rounds"),
              FormatLatency(Quantile(samples, 0.5)),
              FormatLatency(Quantile(samples, 1.0)),
              cpu.ClientPerOp(notifications),
              cpu.ServerPerOp(notifications),
              "put sent -> last watcher notified; CPU per watcher notified" +
                  RssPerWatcher(pid, rss_before, watchers)};
    if (!error.empty()) {
      row.note = error;
      ok = false;
    }
  }
  fanout.Stop();
  return row;
}

bool BenchOne(KvTarget& target, const std::function<std::unique_ptr<WatchFanout>()>& new_fanout,
              const std::vector<int>& put_clients, const std::vector<int>& watcher_counts,
              const absl::flat_hash_set<std::string>& phases, pid_t pid) {
  const int max_clients = absl::GetFlag(FLAGS_clients);
  int clients = max_clients;
  for (int n : put_clients) clients = std::max(clients, n);
  target.Connect(clients, std::min(clients, absl::GetFlag(FLAGS_connections)),
                 absl::GetFlag(FLAGS_deadline));
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'x');
  std::vector<Row> rows;
  bool ok = true;

  if (phases.contains("put")) {
    for (int n : put_clients) {
      const std::string prefix = absl::StrCat("bench/put", n, "/");
      rows.push_back(RunPhase(absl::StrCat("put (durable), ", n, " clients"), n, pid,
                              [&](int client, int64_t seq, OperationDone& done) {
                                target.Put(client, absl::StrCat(prefix, client, "/", seq), value,
                                           done);
                              }));
    }
  }

  if (phases.contains("get")) {
    for (int i = 0; i < kGetKeys && ok; ++i) {
      const std::string error = CallOnce(
          [&](OperationDone& done) { target.Put(0, absl::StrCat("bench/get/", i), value, done); });
      if (!error.empty()) {
        rows.push_back({"get preload", "-", "-", "-", "-", "-", error});
        ok = false;
      }
    }
    if (ok) {
      rows.push_back(RunPhase(
          absl::StrCat("get, ", max_clients, " clients"), max_clients, pid,
          [&](int client, int64_t seq, OperationDone& done) {
            target.Get(client, absl::StrCat("bench/get/", (client * 7919 + seq) % kGetKeys), done);
          }));
    }
  }
  if (phases.contains("add")) {
    if (target.SupportsAdd()) {
      rows.push_back(RunPhase(absl::StrCat("add (one counter), ", max_clients, " clients"),
                              max_clients, pid, [&](int client, int64_t, OperationDone& done) {
                                target.Add(client, "bench/counter", done);
                              }));
    } else {
      rows.push_back({"add", "n/a", "-", "-", "-", "-", "no atomic add in this API"});
    }
  }

  if (phases.contains("watch") && new_fanout) {
    for (int watchers : watcher_counts) {
      if (watchers == 0) continue;
      // Fresh streams and connections per test (the last ones closed).
      std::unique_ptr<WatchFanout> fanout = new_fanout();
      rows.push_back(RunFanout(*fanout, watchers, pid, ok));
    }
  }
  PrintTable(target.name(), rows);
  return ok;
}

}  // namespace
}  // namespace ddp::kv_bench

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG, so every Mutex operation feeds
  // the deadlock detector's lock graph (GraphCycles): measurable CPU per call
  // in a load generator that must stay cheaper than the server it measures.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(
      "kv_bench --ddp HOST:PORT --etcd HOST:PORT: durable put/get/add "
      "throughput and latency, and watch fan-out, over gRPC");
  absl::ParseCommandLine(argc, argv);
  std::vector<int> put_clients;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_put_clients), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1 || n > 4096) {
      std::fprintf(stderr, "kv_bench: --put_clients entry '%s' must be 1..4096\n",
                   std::string(part).c_str());
      return 2;
    }
    put_clients.push_back(n);
  }
  std::vector<int> watcher_counts;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_watchers), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 0 || n > 100'000) {
      std::fprintf(stderr, "kv_bench: --watchers entry '%s' must be 0..100000\n",
                   std::string(part).c_str());
      return 2;
    }
    watcher_counts.push_back(n);
  }
  absl::flat_hash_set<std::string> phases;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_phases), ',', absl::SkipEmpty())) {
    if (part != "put" && part != "get" && part != "add" && part != "watch") {
      std::fprintf(stderr,
                   "kv_bench: --phases entry '%s' is not put, get, add or "
                   "watch\n",
                   std::string(part).c_str());
      return 2;
    }
    phases.insert(std::string(part));
  }
  if (absl::GetFlag(FLAGS_clients) < 1 || absl::GetFlag(FLAGS_clients) > 4096 ||
      absl::GetFlag(FLAGS_connections) < 1 || absl::GetFlag(FLAGS_connections) > 4096 ||
      absl::GetFlag(FLAGS_value_bytes) < 0 ||
      absl::GetFlag(FLAGS_duration) <= absl::ZeroDuration() ||
      absl::GetFlag(FLAGS_deadline) < absl::ZeroDuration()) {
    std::fprintf(stderr,
                 "kv_bench: --clients and --connections must be 1..4096, "
                 "--value_bytes >= 0, --duration > 0, "
                 "--deadline >= 0\n");
    return 2;
  }
  const std::string ddp_address = absl::GetFlag(FLAGS_ddp);
  {
    ddp::TlsClientFiles tls{absl::GetFlag(FLAGS_ddp_tls_ca), absl::GetFlag(FLAGS_ddp_tls_cert),
                            absl::GetFlag(FLAGS_ddp_tls_key)};
    if (absl::Status checked = ddp::CheckTlsClientFiles(tls); !checked.ok()) {
      std::cerr << "kv_bench: " << checked.message() << "\n";
      return 2;
    }
    std::string token;
    if (!absl::GetFlag(FLAGS_ddp_token_file).empty()) {
      absl::StatusOr<std::string> read =
          ddp::ReadTokenFile("--ddp_token_file", absl::GetFlag(FLAGS_ddp_token_file));
      if (!read.ok()) {
        std::cerr << "kv_bench: " << read.status().message() << "\n";
        return 2;
      }
      token = *read;
    }
    ddp::kv_bench::SecureChannelsTo(ddp_address, tls, token);
  }
  const std::string etcd_address = absl::GetFlag(FLAGS_etcd);
  const std::string rest_address = absl::GetFlag(FLAGS_rest);
  if (ddp_address.empty() && etcd_address.empty() && rest_address.empty()) {
    std::fprintf(stderr, "kv_bench: give --ddp, --rest and/or --etcd\n");
    return 2;
  }
  bool ok = true;
  if (!ddp_address.empty()) {
    const std::string ns = absl::GetFlag(FLAGS_ddp_namespace);
    auto target = ddp::kv_bench::NewDdpTarget(ddp_address, ns);
    ok &= ddp::kv_bench::BenchOne(
        *target, [&] { return ddp::kv_bench::NewDdpWatchFanout(ddp_address, ns); }, put_clients,
        watcher_counts, phases, absl::GetFlag(FLAGS_ddp_pid));
    if (absl::GetFlag(FLAGS_ddp_put_stream) && phases.contains("put")) {
      auto stream = ddp::kv_bench::NewDdpStreamTarget(ddp_address, ns);
      ok &= ddp::kv_bench::BenchOne(*stream, nullptr, put_clients, watcher_counts, {"put"},
                                    absl::GetFlag(FLAGS_ddp_pid));
    }
  }
  if (!rest_address.empty()) {
    auto target = ddp::kv_bench::NewRestTarget(rest_address, absl::GetFlag(FLAGS_ddp_namespace));
    ok &= ddp::kv_bench::BenchOne(*target, nullptr, put_clients, watcher_counts, phases,
                                  absl::GetFlag(FLAGS_ddp_pid));
  }
  if (!etcd_address.empty()) {
    auto target = ddp::kv_bench::NewEtcdTarget(etcd_address);
    ok &= ddp::kv_bench::BenchOne(
        *target, [&] { return ddp::kv_bench::NewEtcdWatchFanout(etcd_address); }, put_clients,
        watcher_counts, phases, absl::GetFlag(FLAGS_etcd_pid));
  }
  return ok ? 0 : 1;
}
