// The --help text of ddp-client, kept apart from the parser so each file stays
// readable.

#include <string>

#include "client/launch_options.h"

namespace ddp::client {

std::string LaunchUsage() {
  return R"(usage: ddp-client [flags] ENTRYPOINT [script args...]

Node agent of ddp-coordinator: joins a job at the coordinator, gets its ranks, MASTER_ADDR /
MASTER_PORT and the NCCL unique id, then starts and supervises the local training workers.
Flags follow torchrun: `-` and `_` are interchangeable (--nproc-per-node == --nproc_per_node),
values go as --flag=value or --flag value, and an unambiguous prefix stands for the flag
(--nproc for --nproc-per-node), as argparse allows. A value flag not given is read from PET_<NAME>
(e.g. PET_NNODES) when set. Everything from ENTRYPOINT on (or after `--`) is the script's.

Job and membership
  --rdzv-id, --job ID             Job id shared by all nodes of the job ([A-Za-z0-9._-],
                                  up to 128 chars). Default: the scheduler's
                                  (TORCHELASTIC_RUN_ID, SLURM_JOB_ID, LSB_JOBID, PBS_JOBID),
                                  else a fresh one for a single node; required otherwise.
  --rdzv-endpoint, --coordinator HOST[:PORT][,HOST[:PORT]...]
                                  Coordinator address (port 29400 when none is given); for
                                  coordinators in HA, all of them: the agent finds the
                                  leader and follows it across failovers.
                                  Default: $DDP_COORDINATOR, else localhost:29400.
  --nnodes N|MIN:MAX              Nodes in the job; the rendezvous closes at MAX nodes, or
                                  after the last-call timeout at MIN nodes. Default: 1:1.
  --nproc-per-node N|auto|cpu|gpu Workers on this node. gpu = number of visible GPUs (an
                                  error without GPUs); cpu = number of CPUs; auto = GPUs if
                                  any, else CPUs (torchrun's rule). Default: 1.
  --max-restarts N                Job-wide restart budget: group restarts before the job
                                  fails. Default: 0.
  --rdzv-conf K=V,...             Job timeouts, in seconds or like 30s: join_timeout (alias
                                  timeout), last_call_timeout, close_timeout,
                                  heartbeat_timeout, shutdown_timeout. torchrun's is_host,
                                  read_timeout, keep_alive_*, use_libuv, rank, store_type
                                  are accepted and ignored; other keys are errors.
  --rdzv-backend c10d             torchrun's usual form: the same command on every node with
                                  --rdzv-endpoint HEAD:PORT and nothing started; the agent on
                                  HEAD serves the coordinator there (from its own binary,
                                  nothing else installed) when none answers (state lost
                                  with that agent: a standalone coordinator is durable).
                                  etcd, etcd-v2 and static are refused with what to do
                                  instead.
  --standalone                    Single node: the agent serves a private coordinator from
                                  its own binary (a child process); the job id is random
                                  and --rdzv-endpoint/--rdzv-id are ignored.
  --node-rank N                   Ask for this group rank (granted when free).
  --node-id ID                    Stable id of this node. Default: the hostname.
  --local-addr ADDR               Address other nodes reach this node at (MASTER_ADDR when
                                  this node is group rank 0). Default: looked up.
  --role NAME                     ROLE_NAME of the workers. Default: default.
  --tls-ca FILE                   PEM CA certificates that signed the coordinator's: connect
                                  over TLS ($DDP_TLS_CA).
  --tls-cert FILE, --tls-key FILE A client certificate and its key, for a coordinator that
                                  requires one (mTLS; $DDP_TLS_CERT, $DDP_TLS_KEY).
  --token-file FILE               Bearer token for a coordinator with authorization; the
                                  workers get it as DDP_TOKEN ($DDP_TOKEN).
  --connect-timeout SECONDS       Keep retrying an unreachable coordinator this long at
                                  start, then exit 2. Default: 60.

Workers
  -m, --module                    ENTRYPOINT is a Python module (python -u -m MODULE).
  --no-python                     Run ENTRYPOINT directly, never through Python.
  --use-env[=true|false]          torch.distributed.launch compatibility. true (default, as
                                  torchrun): the local rank is only in LOCAL_RANK. false:
                                  also pass --local_rank=N to the script.
  --local-rank-spelling underscore|dash
                                  With --use-env=false: pass --local_rank=N (torch 1.x's
                                  launch; default) or --local-rank=N (torch 2.x's).
  --run-path                      Run ENTRYPOINT (a path) through Python even when it is an
                                  executable; wins over --no-python (torchrun's --run-path).
  --health-check CHECK            Run CHECK before joining and again after each restart
                                  stopped the workers (repeatable, at most 16): a shell
                                  command (exit 0 passes), or
                                  name=NAME,timeout=10s,cmd=CMD (cmd= last), or
                                  builtin=disk[,min-free=1G] (free space in the log dir),
                                  builtin=gpus (the announced GPUs are /dev/nvidiaN), or
                                  builtin=gloo[,world-size=2] (a loopback gloo all-reduce
                                  under PYTHON_EXEC; needs torch); timeout= for any
                                  (default 60s). A failing node does not join, or leaves
                                  the job at the restart: the coordinator stores the
                                  check's name and output with the node (ddpctl nodes get)
                                  and the others go on without it. The time is the node's:
                                  a restart waits for a node's checks at most the job's
                                  shutdown timeout. Not run for survivors kept by
                                  --in-process-restart.
  --prewarm MODULE[,MODULE...]    Keep one standby interpreter per local rank with these
                                  modules imported (e.g. torch,torch.distributed), its
                                  rank's static environment set; the next generation's
                                  worker is that interpreter, given the generation's
                                  environment: a restart does not pay for `import torch`.
                                  The script sees what a cold start sees. One zygote
                                  interpreter per node imports them once and forks each
                                  standby (a refill costs a fork, not an import). A standby
                                  that cannot serve (environment changed, died, not a
                                  Python entry point) means a cold start, logged. Costs one
                                  idle interpreter per local rank, sharing the zygote's
                                  pages until written ($DDP_PREWARM).
  --in-process-restart[=true|false]
                                  On a failure, keep the surviving workers' processes:
                                  a worker whose training loop runs under
                                  ddp_coordinator.run(train_loop, state) leaves the broken
                                  process group, waits for the next generation and goes on
                                  with its memory; only the failed ranks start again (warm
                                  with --prewarm). Restart budget, root cause and events as
                                  for a full restart. Scripts without the wrapper restart
                                  as before. docs/worker-contract.md ($DDP_IN_PROCESS_RESTART).
  --in-process-restart-timeout SECONDS
                                  How long a surviving worker may take to leave the broken
                                  process group before it is stopped and started again as
                                  without --in-process-restart; at most half of the job's
                                  shutdown timeout (the coordinator's stop barrier). Default: 5.
  PYTHON_EXEC (environment)       Interpreter for Python entry points. Default: python3.
  A `.py` ENTRYPOINT or -m runs as $PYTHON_EXEC -u ...; an executable file runs as it is;
  anything else runs under Python, as torchrun does.
  --monitor-interval SECONDS      Period of the worker checks (heartbeat files). Worker
                                  exits are reported at once regardless. Default: 0.1.
  --worker-heartbeat-timeout SECONDS
                                  A worker that has touched $DDP_HEARTBEAT_FILE and then
                                  not for this long counts as hung (a failure). 0 disables.
                                  Default: 300.
  --hang-timeout SECONDS          The job's hang_timeout (when this node creates the job;
                                  the job's wins): workers that never touched
                                  $DDP_HEARTBEAT_FILE (unmodified scripts) are hung once
                                  every worker of the job has been without CPU (5 % of a
                                  core) or I/O, children included, for this long; the
                                  coordinator decides and names the rank the others
                                  waited for. Found within this + 1.5 s. 0 disables; else
                                  at least 2. Default: 10.
  --progress-interval SECONDS     How often the workers' progress reports
                                  (ddp_coordinator.report_progress, $DDP_PROGRESS_FILE)
                                  are read and relayed to the coordinator; a shorter one
                                  shows progress and stragglers sooner and costs a stream
                                  message per node that often. Default: 5.
  --shutdown-timeout SECONDS      SIGTERM to each worker's process group, SIGKILL after
                                  this long. Default: 30.
  --preemption-grace SECONDS      A SIGTERM to the agent while workers run does not stop
                                  them: the job learns this node leaves within SECONDS,
                                  every worker gets the preemption notice
                                  (ddp_coordinator.preemption_pending()) and the job goes
                                  on without the node once every worker called
                                  ddp_coordinator.ready_to_leave(), or after SECONDS.
                                  No restart is counted. A second SIGTERM stops at once.
                                  Default: 0 (stop at once, as torchrun)
                                  ($DDP_PREEMPTION_GRACE).
  --preemption-notice-file PATH   The cloud's preemption notice: when PATH appears, as a
                                  SIGTERM with the grace it holds (whole seconds), else
                                  --preemption-grace, else 30 s; the agent then exits 4
                                  ($DDP_PREEMPTION_NOTICE_PATH).
  --straggler-exclude-factor F    The job's straggler policy: a node with a rank slower
                                  than 1/F of the median speed for
                                  --straggler-exclude-after is drained and excluded, no
                                  restart counted. F in [1.1, 100]; 0: off. Default: 0.
  --straggler-exclude-after SECONDS
                                  How long a rank must stay that slow. Default: 60.

Logs
  --log-dir DIR                   Base directory; each run writes
                                  DIR/<job>_<id>/attempt_<N>/<local_rank>/
                                  {stdout.log,stderr.log,error.json}, N from 0, one per
                                  generation. Default: a temporary directory.
                                  The agent's own lines: DIR/<job>_<id>/agent.log (and
                                  coordinator.log for the one it serves); on stderr,
                                  warnings and errors only in the --standalone, c10d and
                                  static forms, everything in the others.
                                  DDP_LOG_LEVEL=debug|info|warning|error sets the stderr
                                  level (and the served coordinator's).
  -r, --redirects SPEC            Streams written to the log files instead of the console:
                                  0 none, 1 stdout, 2 stderr, 3 both, or per local rank
                                  like 0:1,1:2. Default: 0.
  -t, --tee SPEC                  Streams written to the log files and to the console
                                  (same syntax); wins over -r. Teed console lines carry
                                  torchrun's prefix `[<role><local rank>]:`. Default: 0.
  --local-ranks-filter R,R,...    Teed console output only from these local ranks (files
                                  get all), as torchrun.
  A stream neither teed nor redirected reaches the console exactly as the worker writes
  it (no prefix, partial lines and \r kept): `> result.json` works.

Accepted and ignored (torchrun): --master-addr, --master-port, --start-method.
  -h, --help                      This text.

Exit codes
  0    the job succeeded (every worker of its last generation exited 0)
  1    the job failed or was cancelled (root cause printed), or this node was
       dismissed (excluded, declared dead)
  2    bad flags, coordinator unreachable past --connect-timeout, or the
       coordinator refused this node (contradicting flags, finished job, a live
       agent already uses this --node-id, ...), or the entry point cannot start
       (missing script or module, a first import the interpreter cannot find, a
       script that does not compile, a --no-python entry point that is not
       executable): checked before the node joins, so no restart is spent
  3    the job succeeded without this node: it waited as a hot spare and ran no worker
  128+N  the agent was stopped by signal N (SIGHUP 129, SIGINT 130, SIGTERM 143): workers
       got the same signal (SIGINT, SIGHUP: then SIGTERM at half --shutdown-timeout), SIGKILL after
       --shutdown-timeout, and the node left the job
)";
}

}  // namespace ddp::client
