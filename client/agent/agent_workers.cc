// The agent's workers as specs: what each local rank runs for an
// assignment, and the --prewarm standbys made before the first one.

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/agent/agent.h"
#include "client/python_package.h"
#include "client/worker_command.h"
#include "client/worker_files.h"
#include "client/worker_process.h"
#include "common/logging.h"

namespace ddp::client {

WorkerSpec Agent::SpecFor(const v1::Assignment& p, int local_rank) const {
  const LaunchOptions& launch = options_.launch;
  WorkerEnvContext context{launch.job_id,        launch.coordinator, launch.role,  p.max_restarts(),
                           p.local_world_size(), lease_file_,        launch.token, notice_file_};
  WorkerSpec spec;
  spec.local_rank = local_rank;
  spec.global_rank = static_cast<int>(p.global_rank_offset()) + local_rank;
  spec.argv = BuildWorkerArgv(launch, local_rank);
  spec.files = WorkerFilesFor(options_.run_dir, p.generation(), local_rank);
  spec.env = BuildWorkerEnv(p, context, local_rank, spec.files, options_.base_env);
  // The agent's sitecustomize.py first, so it wins over the user's (which it
  // runs): it registers the stack dump (client/stack_dump.h).
  if (!worker_site_dir_.empty() && RunsUnderPython(launch)) {
    spec.env = WithPythonPathFirst(std::move(spec.env), worker_site_dir_);
  }
  // Where the worker and the agent agree on an in-process restart
  // (recovery_channel.h): the same folder for every generation of the slot.
  if (launch.in_process_restart) spec.env["DDP_RECOVERY_DIR"] = RecoveryDirOf(local_rank);
  spec.redirect = launch.redirects.ForRank(local_rank);
  spec.tee = launch.tee.ForRank(local_rank);
  spec.show_on_console =
      launch.local_ranks_filter.empty() || launch.local_ranks_filter.count(local_rank) > 0;
  spec.console_prefix = absl::StrCat("[", launch.role, local_rank, "]:");
  // In an interactive run local rank 0 writes its stderr to the terminal
  // itself, as under torchrun; every other worker's stderr passes through
  // the agent (bytes unchanged, a prompt of input() included), which keeps
  // its tail for the failure report.
  spec.capture_stderr = !(local_rank == 0 && options_.supervisor.terminal_fd >= 0);
  return spec;
}

void Agent::StartStandbys() {
  const LaunchOptions& launch = options_.launch;
  if (launch.prewarm.empty()) return;
  if (options_.run_dir.empty()) {
    DDP_LOG(WARNING) << "--prewarm ignored: no run directory for its files";
    return;
  }
  StandbyPoolOptions pool_options;
  pool_options.modules = launch.prewarm;
  // The in-process wrapper a replaced rank imports first: warm too.
  if (launch.in_process_restart) pool_options.optional_modules = {"ddp_coordinator.recovery"};
  pool_options.python_exec = launch.python_exec;
  pool_options.site_dir = options_.run_dir + "/prewarm";
  // One zygote imports once and forks each standby (standby_pool.h); what
  // its imports print goes to the agent's console.
  pool_options.zygote_stdout_fd = options_.supervisor.console_out_fd;
  pool_options.zygote_stderr_fd = options_.supervisor.console_err_fd;
  // Standbys at idle CPU priority, refilled at once (from the zygote, 250 ms
  // after a start: zygote_refill_delay): a failure right after a start finds
  // its standby warm, and the standby never slows the workers.
  // Only when the agent may move them back to normal priority at hand-over.
  pool_options.idle_cpu_priority = CanRestoreNormalCpuPriority();
  if (pool_options.idle_cpu_priority) pool_options.refill_delay = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<StandbyPool>> pool =
      StandbyPool::Create(pool_options, monotonic_clock_);
  if (!pool.ok()) {
    DDP_LOG(WARNING) << "--prewarm off: " << pool.status();
    return;
  }
  standby_pool_ = std::move(*pool);
  // The environment the first assignment will most likely bring (this node's
  // nproc and restart budget); a different one means a cold start, logged.
  v1::Assignment expected;
  expected.set_local_world_size(launch.nproc_per_node);
  expected.set_max_restarts(launch.max_restarts);
  for (int local_rank = 0; local_rank < launch.nproc_per_node; ++local_rank) {
    const WorkerSpec spec = SpecFor(expected, local_rank);
    standby_pool_->Prepare(spec,
                           DirectConsoleTargets(spec, options_.supervisor.console_out_fd,
                                                options_.supervisor.console_err_fd),
                           absl::ZeroDuration());
  }
  DDP_LOG(INFO) << "--prewarm: preparing " << launch.nproc_per_node << " standby interpreters with "
                << absl::StrJoin(launch.prewarm, ",")
                << " imported, forked by one zygote that imports them once; each refilled "
                << absl::FormatDuration(pool_options.zygote_refill_delay) << " after a start"
                << (pool_options.idle_cpu_priority ? ", at idle CPU priority" : "");
}

}  // namespace ddp::client
