#ifndef DDP_CLIENT_LAUNCH_OPTIONS_H_
#define DDP_CLIENT_LAUNCH_OPTIONS_H_

// Command line of the node agent:
//
//   ddp-client [flags] ENTRYPOINT [script args...]
//
// Flags are torchrun's, spelled with '-' or '_' (`--nproc-per-node` ==
// `--nproc_per_node`), as `--flag=value` or `--flag value` (short ones also
// `-r3`). Everything from ENTRYPOINT on (or after a bare `--`) belongs to the
// training script. Like torchrun's argparse `env` action, a value flag that is
// not given is read from `PET_<NAME>` (e.g. PET_NNODES, PET_NPROC_PER_NODE)
// when that variable is set; the command line wins. LaunchUsage() documents
// every flag, its default and what it means here.
//
// Thread-safety: pure functions of their arguments.

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/activity_tracker.h"
#include "client/health_check.h"
#include "client/std_streams.h"
#include "common/tls_files.h"

namespace ddp::client {

// Facts about this machine that flag values depend on; injected so tests are
// deterministic.
struct HostInfo {
  int gpu_count = 0;  // visible NVIDIA GPUs
  int cpu_count = 1;  // online CPUs (os.cpu_count() in torchrun)
  std::string hostname;
  // Environment lookup; returns nullopt for an unset variable.
  std::function<std::optional<std::string>(const std::string&)> getenv;

  // GPUs from /proc/driver/nvidia/gpus (bounded by CUDA_VISIBLE_DEVICES when it
  // is set), CPUs from sysconf, hostname from gethostname, the process
  // environment.
  static HostInfo FromSystem();
};

// --rdzv-conf key=value pairs. Durations accept seconds ("30", "0.5") or
// "30s"/"2m".
struct RendezvousConf {
  std::optional<absl::Duration> join_timeout;  // also torchrun's `timeout`
  std::optional<absl::Duration> last_call_timeout;
  std::optional<absl::Duration> close_timeout;
  std::optional<absl::Duration> heartbeat_timeout;  // node heartbeat, coordinator side
  std::optional<absl::Duration> shutdown_timeout;   // also settable by --shutdown-timeout
  // torchrun keys accepted for compatibility but meaningless here (e.g.
  // is_host, read_timeout, keep_alive_interval, use_libuv): name -> value.
  std::vector<std::pair<std::string, std::string>> ignored;
};

struct LaunchOptions {
  // --nnodes N|MIN:MAX (torchrun default "1:1").
  int min_nodes = 1;
  int max_nodes = 1;
  // --nproc-per-node N|auto|cpu|gpu (torchrun default "1"), resolved to a
  // count.
  int nproc_per_node = 1;
  std::string nproc_per_node_spec = "1";
  // --max-restarts (job-wide restart budget; torchrun default 0).
  int max_restarts = 0;
  // --monitor-interval seconds (torchrun default 0.1): period of the agent's
  // worker checks (heartbeat files); exits are events and do not wait for it.
  absl::Duration monitor_interval = absl::Milliseconds(100);
  // --rdzv-id / --job (or PET_RDZV_ID). When none is given: the scheduler's
  // id from the environment (TORCHELASTIC_RUN_ID, SLURM_JOB_ID, LSB_JOBID,
  // PBS_JOBID); else a fresh random id for one node or --standalone; a
  // multi-node run must name one (two unrelated jobs would merge under
  // torchrun's shared default "none").
  std::string job_id;
  // --rdzv-endpoint / --coordinator host:port; default $DDP_COORDINATOR or
  // localhost:29400.
  std::string coordinator = "localhost:29400";
  RendezvousConf rdzv_conf;
  // --rdzv-backend: accepted (torchrun scripts pass it) and ignored.
  std::string rdzv_backend;
  // --standalone: embedded coordinator on this node; job id randomized,
  // endpoint ignored.
  bool standalone = false;
  std::string role = "default";  // --role
  bool module = false;           // -m / --module
  bool no_python = false;        // --no-python
  bool run_path = false;         // --run-path: always through Python
  // How use_env=false passes the local rank: "--local_rank=N" (torch 1.x's
  // torch.distributed.launch) or "--local-rank=N" (torch 2.x).
  std::string local_rank_arg = "--local_rank";
  // --use-env (torch.distributed.launch). true (torchrun's behaviour, the
  // default): the local rank is only in LOCAL_RANK. --use-env=false: also pass
  // `--local_rank=N` to the script.
  bool use_env = true;
  bool use_env_given = false;        // --use-env on the command line (either value)
  std::string log_dir;               // --log-dir; empty = a fresh temporary directory
  StdSpec redirects;                 // -r / --redirects
  StdSpec tee;                       // -t / --tee
  std::set<int> local_ranks_filter;  // --local-ranks-filter; empty = every local rank
  std::string local_addr;            // --local-addr; empty = look it up
  std::optional<int> node_rank;      // --node-rank: requested group rank (a wish)
  // torch.distributed.launch's static form (--master-addr/--master-port, no
  // coordinator given): MASTER_ADDR/MASTER_PORT the workers get, and the
  // coordinator lives at master_addr:master_port+1, served by the agent on
  // that host (see StaticMasterEndpoint).
  std::string master_addr;
  std::optional<int> master_port;
  bool static_form = false;
  // --rdzv-endpoint/--coordinator, PET_RDZV_ENDPOINT or DDP_COORDINATOR given.
  bool coordinator_given = false;
  // --node-id; default the hostname, or in the static form with --node-rank
  // N, "HOSTNAME-node-rank-N" (the node rank identifies the node there, so
  // two "nodes" may share a host).
  std::string node_id;
  bool node_id_given = false;
  absl::Duration worker_heartbeat_timeout = absl::Minutes(5);  // 0 disables hang checks
  // --hang-timeout: a worker that never touched its heartbeat file is hung
  // after this long without CPU or I/O on its whole node (activity_tracker.h);
  // 0 disables; else at least kMinHangTimeout.
  absl::Duration hang_timeout = kDefaultHangTimeout;
  // How often the workers' progress files are read (progress_reader.h).
  absl::Duration progress_interval = absl::Seconds(5);
  absl::Duration shutdown_timeout = absl::Seconds(30);  // SIGTERM -> SIGKILL
  // --preemption-grace: a SIGTERM to the agent gives the workers this long
  // to checkpoint (client/agent/agent.h); 0: it stops them at once.
  absl::Duration preemption_grace = absl::ZeroDuration();
  // --preemption-notice-file: a file the cloud's agent creates before the
  // machine is reclaimed; empty: none watched.
  std::string preemption_notice_file;
  // --straggler-exclude-factor / --straggler-exclude-after: the job's
  // straggler exclusion policy (JobSettings, jobs.proto); 0: off.
  double straggler_exclude_factor = 0;
  absl::Duration straggler_exclude_after = absl::Seconds(60);
  // --connect-timeout: how long the first registration retries an unreachable
  // coordinator before the agent gives up (exit 2).
  absl::Duration connect_timeout = absl::Seconds(60);
  // --tls-ca/--tls-cert/--tls-key (DDP_TLS_CA/_CERT/_KEY): TLS to the
  // coordinator, with a client certificate for mTLS.
  TlsClientFiles tls;
  // --token-file's contents, else $DDP_TOKEN: the bearer token for a
  // coordinator with authorization; the workers get it as DDP_TOKEN.
  std::string token;
  std::string python_exec = "python3";  // $PYTHON_EXEC
  // --prewarm MODULE[,MODULE...]: a standby interpreter per local rank with
  // these imported, handed over as the worker of the next generation
  // (client/prewarm/standby_pool.h); empty: every start is cold.
  std::vector<std::string> prewarm;
  // --in-process-restart: on a failure, workers that run their loop under
  // ddp_coordinator.run keep their process (client/recovery_channel.h); only
  // the failed ranks are started again.
  bool in_process_restart = false;
  // --in-process-restart-timeout: how long a surviving worker has to leave
  // the broken process group before it is stopped as without the flag.
  absl::Duration in_process_restart_timeout = absl::Seconds(5);
  // --health-check (repeatable, client/health_check.h): run before every
  // Register; their results go to the coordinator, which refuses the node when
  // one failed.
  std::vector<HealthCheckSpec> health_checks;
  std::string entrypoint;
  std::vector<std::string> script_args;
  bool help = false;  // -h / --help given: print LaunchUsage() and exit 0
  // Human-readable notes about accepted-but-ignored flags, for the agent to
  // log.
  std::vector<std::string> notes;
};

// Parses `args` (argv without argv[0]).
// Possible errors: INVALID_ARGUMENT — unknown flag (named), missing or
// malformed value (flag and value named, with the accepted form), MIN > MAX in
// --nnodes, `gpu` without GPUs, unknown --rdzv-conf key, --module with
// --no-python, missing ENTRYPOINT.
absl::StatusOr<LaunchOptions> ParseLaunchOptions(const std::vector<std::string>& args,
                                                 const HostInfo& host);

// The --help text: every flag, its spellings, default and meaning.
std::string LaunchUsage();

}  // namespace ddp::client

#endif  // DDP_CLIENT_LAUNCH_OPTIONS_H_
