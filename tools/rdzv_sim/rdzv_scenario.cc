#include "tools/rdzv_sim/rdzv_scenario.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/proc_stats.h"
#include "tools/rdzv_sim/coordinator_child.h"
#include "tools/rdzv_sim/grpc_sim_fleet.h"

namespace ddp::rdzv_sim {
namespace {

v1::JobSettings AgentSettings(const ScenarioOptions& o, int nodes) {
  v1::JobSettings settings;
  settings.set_min_nodes(nodes);
  settings.set_max_nodes(nodes);
  settings.set_nproc_per_node(o.nproc);
  settings.set_max_restarts(3);
  settings.set_join_timeout_ms(absl::ToInt64Milliseconds(o.phase_timeout) * 4);
  settings.set_last_call_timeout_ms(1000);
  settings.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(o.heartbeat_interval));
  settings.set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(o.heartbeat_timeout));
  settings.set_shutdown_timeout_ms(absl::ToInt64Milliseconds(o.phase_timeout));
  return settings;
}

std::optional<absl::Duration> CpuOf(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  absl::StatusOr<absl::Duration> cpu = ReadProcessCpuTime(pid);
  if (!cpu.ok()) return std::nullopt;
  return *cpu;
}

std::optional<int64_t> RssOf(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  absl::StatusOr<int64_t> rss = ReadProcessRssBytes(pid);
  if (!rss.ok()) return std::nullopt;
  return *rss;
}

std::map<std::string, absl::Duration> ThreadsOf(pid_t pid) {
  if (pid <= 0) return {};
  auto threads = ReadThreadCpuByName(pid);
  return threads.ok() ? *threads : std::map<std::string, absl::Duration>{};
}

// The 1-minute load average (/proc/loadavg's first field).
std::optional<double> LoadAverage() {
  std::ifstream file("/proc/loadavg");
  double load = 0;
  if (!(file >> load)) return std::nullopt;
  return load;
}

absl::Duration SelfCpu() {
  absl::StatusOr<absl::Duration> cpu = ReadProcessCpuTime(getpid());
  return cpu.ok() ? *cpu : absl::ZeroDuration();
}

// A fresh directory under `root`, removed with the guard.
class TempDir {
 public:
  explicit TempDir(const std::string& root) {
    std::string pattern = absl::StrCat(root, "/rdzv_sim.XXXXXX");
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty() && !keep_) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

SizeResult RunSize(const ScenarioOptions& o, int nodes, std::unique_ptr<TempDir>& work);

}  // namespace

int SimCompletionQueues(int nodes) {
  constexpr int kStreamsPerQueue = 2048;
  return std::clamp((std::max(nodes, 0) + kStreamsPerQueue - 1) / kStreamsPerQueue, 4, 64);
}

SizeResult RunScenario(const ScenarioOptions& o, int nodes) {
  std::unique_ptr<TempDir> work;
  const std::optional<double> load_start = LoadAverage();
  SizeResult result = RunSize(o, nodes, work);
  result.load_start = load_start;
  result.load_end = LoadAverage();
  if (work && (!result.error.empty() || !result.warning.empty())) {
    work->Keep();
    absl::StrAppend(result.error.empty() ? &result.warning : &result.error,
                    " (coordinator log kept in ", work->path(), ")");
  }
  return result;
}

namespace {

SizeResult RunSize(const ScenarioOptions& o, int nodes, std::unique_ptr<TempDir>& work) {
  SizeResult result;
  result.nodes = nodes;
  result.channels = std::min(o.channels, nodes);
  result.job_id =
      absl::StrFormat("rdzv-sim-n%d-%08x", nodes, static_cast<uint32_t>(o.seed ^ nodes));
  const Clock& clock = RealClock::Get();

  std::unique_ptr<CoordinatorChild> child;
  std::string target = o.coordinator_target;
  pid_t pid = o.coordinator_pid;
  if (target.empty()) {
    work = std::make_unique<TempDir>(o.work_root);
    if (work->path().empty()) {
      result.error = absl::StrCat("cannot create a directory in ", o.work_root);
      return result;
    }
    CoordinatorChildOptions child_options;
    child_options.binary = o.coordinator_binary;
    child_options.data_dir = absl::StrCat(work->path(), "/data");
    child_options.work_dir = work->path();
    child_options.extra_args = o.coordinator_args;
    absl::StatusOr<std::unique_ptr<CoordinatorChild>> started =
        CoordinatorChild::Start(child_options);
    if (!started.ok()) {
      result.error = started.status().ToString();
      return result;
    }
    child = std::move(*started);
    target = child->target();
    pid = child->pid();
  }
  absl::SleepFor(o.settle);
  result.rss_idle_bytes = RssOf(pid);

  SimFleetOptions fleet_options;
  fleet_options.target = target;
  fleet_options.job_id = result.job_id;
  fleet_options.nodes = nodes;
  fleet_options.channels = result.channels;
  fleet_options.heartbeat_threads = o.heartbeat_threads;
  fleet_options.nproc = o.nproc;
  fleet_options.settings = AgentSettings(o, nodes);
  fleet_options.seed = o.seed * 1000003 + nodes;
  fleet_options.ack_heartbeats = o.ack_heartbeats;
  fleet_options.completion_queues =
      o.completion_queues > 0 ? o.completion_queues : SimCompletionQueues(nodes);
  fleet_options.keepalive = o.keepalive;
  absl::StatusOr<std::unique_ptr<GrpcSimFleet>> fleet = GrpcSimFleet::Create(fleet_options, clock);
  if (!fleet.ok()) {
    result.error = fleet.status().ToString();
    return result;
  }

  const std::optional<absl::Duration> coordinator_cpu0 = CpuOf(pid);
  const absl::Duration client_cpu0 = SelfCpu();
  absl::StatusOr<WaveTiming> rendezvous = (*fleet)->Rendezvous(clock.Now() + o.phase_timeout);
  if (!rendezvous.ok()) {
    result.error = absl::StrCat("rendezvous: ", rendezvous.status().ToString());
    result.sim_pacing = (*fleet)->pacing();
    return result;
  }
  result.rendezvous = rendezvous->elapsed;
  result.register_spread = rendezvous->issue_spread;
  result.generation = rendezvous->generation;
  result.registration_round_trip = Summarize((*fleet)->tracker().registration_round_trips());
  const std::optional<absl::Duration> coordinator_cpu1 = CpuOf(pid);
  const absl::Duration client_cpu1 = SelfCpu();
  result.rendezvous_cpu.simulator = client_cpu1 - client_cpu0;
  if (coordinator_cpu0 && coordinator_cpu1) {
    result.rendezvous_cpu.coordinator = *coordinator_cpu1 - *coordinator_cpu0;
  }

  absl::StatusOr<WaveTiming> restart = (*fleet)->Restart(clock.Now() + o.phase_timeout);
  if (!restart.ok()) {
    result.error = absl::StrCat("restart: ", restart.status().ToString());
    result.sim_pacing = (*fleet)->pacing();
    return result;
  }
  result.restart = restart->elapsed;
  result.restart_generation = restart->generation;
  const std::optional<absl::Duration> coordinator_cpu_restarted = CpuOf(pid);
  result.restart_cpu.simulator = SelfCpu() - client_cpu1;
  if (coordinator_cpu1 && coordinator_cpu_restarted) {
    result.restart_cpu.coordinator = *coordinator_cpu_restarted - *coordinator_cpu1;
  }

  // Steady heartbeating: after every agent's first heartbeat of the new
  // generation (its workers' states, on the stream), which is part of the
  // generation's start, not of the steady cost.
  absl::SleepFor(2 * o.heartbeat_interval);
  const absl::Time window_start = clock.Now();
  const int64_t heartbeats0 = (*fleet)->heartbeats_sent();
  const int64_t datagrams0 = (*fleet)->heartbeat_datagrams();
  const std::optional<absl::Duration> coordinator_cpu2 = CpuOf(pid);
  const absl::Duration client_cpu2 = SelfCpu();
  const auto threads_before = ThreadsOf(pid);
  absl::SleepFor(o.heartbeat_window);
  const auto threads_after = ThreadsOf(pid);
  const std::optional<absl::Duration> coordinator_cpu3 = CpuOf(pid);
  const absl::Duration client_cpu3 = SelfCpu();
  result.heartbeat_window = clock.Now() - window_start;
  result.heartbeats_sent = (*fleet)->heartbeats_sent() - heartbeats0;
  result.heartbeat_datagrams = (*fleet)->heartbeat_datagrams() - datagrams0;
  if (coordinator_cpu2 && coordinator_cpu3) {
    result.coordinator_cpu_fraction =
        absl::FDivDuration(*coordinator_cpu3 - *coordinator_cpu2, result.heartbeat_window);
  }
  result.coordinator_threads =
      BusiestThreads(threads_before, threads_after, result.heartbeat_window, /*limit=*/5);
  result.client_cpu_fraction =
      absl::FDivDuration(client_cpu3 - client_cpu2, result.heartbeat_window);
  result.rss_connected_bytes = RssOf(pid);
  result.sim_pacing = (*fleet)->pacing();
  if ((*fleet)->tracker().failures() > 0) {
    result.warning =
        absl::StrCat((*fleet)->tracker().failures(), " streams failed while heartbeating");
  }

  absl::Status shutdown = (*fleet)->Shutdown(absl::Seconds(10));
  if (!shutdown.ok()) {
    DDP_LOG(WARNING) << "shutting the simulated agents down: " << shutdown;
  }
  return result;
}

}  // namespace
}  // namespace ddp::rdzv_sim
