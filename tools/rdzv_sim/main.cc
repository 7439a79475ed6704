// rdzv_sim: simulates N node agents over real gRPC Session streams against a
// coordinator and measures rendezvous and restart latency, the coordinator's
// CPU while every agent heartbeats, and its memory per connected agent.
//
//   rdzv_sim --nodes 256,1024,4096 [--json]
//       starts a fresh coordinator (--coordinator-binary) per size;
//   rdzv_sim --coordinator HOST:PORT [--coordinator-pid PID] --nodes 1024
//       uses a running one (CPU and memory only with its pid).
//
// Exit codes: 0 all sizes ran; 1 a size failed; 2 bad flags.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/flag_names.h"
#include "common/proc_stats.h"
#include "tools/rdzv_sim/rdzv_scenario.h"
#include "tools/rdzv_sim/report.h"

ABSL_FLAG(std::string, nodes, "256,1024,4096",
          "Comma-separated cluster sizes; each runs as its own job");
ABSL_FLAG(std::string, coordinator, "",
          "host:port of a running coordinator; empty: start one per size");
ABSL_FLAG(int, coordinator_pid, 0, "Pid of the --coordinator process, for its CPU and memory");
ABSL_FLAG(std::string, coordinator_binary, "bazel-bin/coordinator/coordinator",
          "Coordinator binary started when --coordinator is empty");
ABSL_FLAG(std::vector<std::string>, coordinator_args, {},
          "Extra comma-separated arguments for the started coordinator");
ABSL_FLAG(std::string, work_dir, "/tmp",
          "Where the started coordinator's data dir and log go (removed)");
ABSL_FLAG(int, channels, 64, "gRPC channels (TCP connections) the agents are spread over");
ABSL_FLAG(int, keepalive_ms, 0,
          "HTTP/2 keepalive pings on each connection this often (0: none; the coordinator "
          "accepts one a second at most)");
ABSL_FLAG(int, completion_queues, 0,
          "Completion queues the agents' streams are spread over, each with its own thread "
          "(0: one per 2,048 nodes, at least 4, at most 64: about 2,048 streams a queue, as "
          "the coordinator's session queues hold, since each operation of Debian's libgrpc "
          "scans its queue's pending ones)");
ABSL_FLAG(int, heartbeat_threads, 4, "Threads pacing the heartbeats");
ABSL_FLAG(int, heartbeat_interval_ms, 500, "Agents' heartbeat interval");
ABSL_FLAG(int, heartbeat_timeout_ms, 3000, "Jobs' heartbeat timeout");
ABSL_FLAG(double, heartbeat_seconds, 10, "Length of the steady-heartbeat CPU window");
ABSL_FLAG(int, phase_timeout_s, 60, "Deadline of rendezvous and of restart");
ABSL_FLAG(int, nproc, 8, "Processes per simulated node");
ABSL_FLAG(uint64_t, seed, 0, "Seed of incarnations and job ids; 0: random");
ABSL_FLAG(bool, json, false, "Print JSON instead of the table");
ABSL_FLAG(bool, ack_heartbeats, true,
          "Heartbeats ask for acknowledgements (the lease), as ddp-client's do");

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitBadFlags = 2;
constexpr int kMaxNodes = 65536;  // the coordinator's own limit (RendezvousLimits)

int BadFlag(const std::string& message) {
  std::fprintf(stderr, "rdzv_sim: %s (see --help)\n", message.c_str());
  return kExitBadFlags;
}

// Returns a non-empty error for a bad value.
std::string CheckRange(const char* name, int64_t value, int64_t low, int64_t high) {
  if (value >= low && value <= high) return "";
  return absl::StrCat("--", name, "=", value, " must be in [", low, ", ", high, "]");
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Simulates N node agents against a coordinator; see tools/rdzv_sim.");
  std::vector<std::string> storage;
  std::vector<char*> args = ddp::NormalizeFlagNames(argc, argv, &storage);
  std::vector<char*> rest = absl::ParseCommandLine(args.size(), args.data());
  if (rest.size() > 1) return BadFlag(absl::StrCat("unexpected argument '", rest[1], "'"));

  std::vector<int> sizes;
  for (absl::string_view item :
       absl::StrSplit(absl::GetFlag(FLAGS_nodes), ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(item, &n) || n < 1 || n > kMaxNodes) {
      return BadFlag(absl::StrCat("--nodes item '", item.substr(0, 20),
                                  "' must be an integer in [1, ", kMaxNodes, "]"));
    }
    sizes.push_back(n);
  }
  if (sizes.empty()) return BadFlag("--nodes lists no size");
  for (const std::string& error :
       {CheckRange("channels", absl::GetFlag(FLAGS_channels), 1, 4096),
        CheckRange("completion-queues", absl::GetFlag(FLAGS_completion_queues), 0, 64),
        absl::GetFlag(FLAGS_keepalive_ms) == 0
            ? std::string()
            : CheckRange("keepalive-ms", absl::GetFlag(FLAGS_keepalive_ms), 1000, 3600000),
        CheckRange("heartbeat-threads", absl::GetFlag(FLAGS_heartbeat_threads), 1, 64),
        CheckRange("heartbeat-interval-ms", absl::GetFlag(FLAGS_heartbeat_interval_ms), 10, 60000),
        CheckRange("heartbeat-timeout-ms", absl::GetFlag(FLAGS_heartbeat_timeout_ms),
                   2 * absl::GetFlag(FLAGS_heartbeat_interval_ms), 3600000),
        CheckRange("phase-timeout-s", absl::GetFlag(FLAGS_phase_timeout_s), 1, 3600),
        CheckRange("nproc", absl::GetFlag(FLAGS_nproc), 1, 1024),
        CheckRange("coordinator-pid", absl::GetFlag(FLAGS_coordinator_pid), 0, 1 << 22)}) {
    if (!error.empty()) return BadFlag(error);
  }
  const double window = absl::GetFlag(FLAGS_heartbeat_seconds);
  if (!(window >= 0.5 && window <= 600)) {
    return BadFlag(absl::StrCat("--heartbeat-seconds=", window, " must be in [0.5, 600]"));
  }

  ddp::rdzv_sim::ScenarioOptions options;
  options.coordinator_target = absl::GetFlag(FLAGS_coordinator);
  options.coordinator_pid = absl::GetFlag(FLAGS_coordinator_pid);
  if (options.coordinator_target.empty() && options.coordinator_pid != 0) {
    return BadFlag("--coordinator-pid needs --coordinator");
  }
  options.coordinator_binary = absl::GetFlag(FLAGS_coordinator_binary);
  options.coordinator_args = absl::GetFlag(FLAGS_coordinator_args);
  options.work_root = absl::GetFlag(FLAGS_work_dir);
  options.channels = absl::GetFlag(FLAGS_channels);
  options.completion_queues = absl::GetFlag(FLAGS_completion_queues);
  options.keepalive = absl::Milliseconds(absl::GetFlag(FLAGS_keepalive_ms));
  options.heartbeat_threads = absl::GetFlag(FLAGS_heartbeat_threads);
  options.nproc = absl::GetFlag(FLAGS_nproc);
  options.heartbeat_interval = absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_interval_ms));
  options.heartbeat_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_timeout_ms));
  options.heartbeat_window = absl::Seconds(window);
  options.phase_timeout = absl::Seconds(absl::GetFlag(FLAGS_phase_timeout_s));
  options.seed = absl::GetFlag(FLAGS_seed);
  options.ack_heartbeats = absl::GetFlag(FLAGS_ack_heartbeats);
  if (options.seed == 0) options.seed = std::random_device{}() | 1;

  // The simulator's own locks are few and simple; Abseil's deadlock detector
  // (on in non-NDEBUG builds) would only add client CPU to the figures.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  ddp::RaiseOpenFileLimit();
  const ddp::MachineInfo machine = ddp::ReadMachineInfo();
  std::vector<ddp::rdzv_sim::SizeResult> results;
  bool failed = false;
  for (int n : sizes) {
    std::fprintf(stderr, "rdzv_sim: %d nodes...\n", n);
    results.push_back(ddp::rdzv_sim::RunScenario(options, n));
    failed = failed || !results.back().error.empty();
  }
  const std::string out = absl::GetFlag(FLAGS_json) ? ddp::rdzv_sim::RenderJson(results, machine)
                                                    : ddp::rdzv_sim::RenderTable(results, machine);
  std::fputs(out.c_str(), stdout);
  return failed ? kExitFailure : 0;
}
