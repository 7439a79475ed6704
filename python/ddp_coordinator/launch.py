"""detectron2's ``launch()``, with ddp-client and the coordinator starting and supervising
the processes.

A detectron2 training script changes its import lines only::

    from ddp_coordinator import comm            # was: from detectron2.utils import comm
    from ddp_coordinator.launch import launch   # was: from detectron2.engine import launch

    def main(args):
        ...                                     # comm.get_rank(), comm.synchronize(), ...

    if __name__ == "__main__":
        args = parser.parse_args()
        launch(main, args.num_gpus, num_machines=args.num_machines,
               machine_rank=args.machine_rank, dist_url=args.dist_url, args=(args,))

How it runs: called in the script's own process, ``launch()`` starts ddp-client, which runs
the same script (same interpreter, same arguments) as ``num_gpus_per_machine`` workers of
the coordinator's job, and waits for it. In each worker, ``launch()`` sees that it is one
(``DDP_LAUNCH_WORKER=1`` in its environment), joins the process group and calls
``main_func(*args)`` itself. ddp-client restarts the whole group (every machine) when any
worker fails, up to ``max_restarts`` times: ``main_func`` must resume from its last
checkpoint, as under detectron2's trainer (``resume=True``). Code above the ``launch()`` call
runs in every worker too (argument parsing, usually); ``args`` are the worker's own.

Ranks are detectron2's: global rank = ``machine_rank * num_gpus_per_machine + local rank``
(``machine_rank`` is asked for as the node's group rank), and :mod:`ddp_coordinator.comm`'s
local process group holds one machine's workers.
"""
import datetime
import os
import re
import shutil
import socket
import subprocess
import sys
from urllib.parse import urlparse

from ddp_coordinator import worker

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)
DEFAULT_MAX_RESTARTS = 3
# Set by launch() for the workers it starts: there launch() runs main_func itself.
WORKER_ENV = "DDP_LAUNCH_WORKER"

__all__ = ["DEFAULT_TIMEOUT", "LaunchError", "launch"]


class LaunchError(RuntimeError):
    """The job failed (or ddp-client could not run it); ``exit_code`` is ddp-client's."""

    def __init__(self, message, exit_code):
        super().__init__(message)
        self.exit_code = exit_code


def _positive(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}={value!r}: expected an integer of at least 1")


def launch(main_func, num_gpus_per_machine, num_machines=1, machine_rank=0, dist_url=None,
           args=(), timeout=DEFAULT_TIMEOUT, *, max_restarts=DEFAULT_MAX_RESTARTS,
           job_id=None):
    """Runs ``main_func(*args)`` in ``num_machines * num_gpus_per_machine`` processes.

    Args:
        main_func: the training function, called in every worker.
        num_gpus_per_machine: processes on this machine (one per GPU; on CPU, gloo).
        num_machines: machines in the job; each calls launch() with its ``machine_rank``.
        machine_rank: this machine's rank, 0 .. num_machines-1.
        dist_url: ``"auto"`` (one machine: a coordinator inside this machine's agent),
            ``"tcp://HOST:PORT"`` (machine 0's address, as in detectron2: a coordinator
            that answers there is used, otherwise machine 0's agent serves one there), or
            None (``$DDP_COORDINATOR``'s coordinator when set, else as ``"auto"``).
        args: the arguments of ``main_func``.
        timeout: ``init_process_group``'s timeout (detectron2's default: 30 minutes).
        max_restarts: group restarts after worker failures before the job fails (the same
            on every machine).
        job_id: the coordinator's job id (``[A-Za-z0-9._-]``); default: the scheduler's
            (``TORCHELASTIC_RUN_ID``, ``SLURM_JOB_ID``, ...), else one made from dist_url.

    A job of one process runs ``main_func(*args)`` here, as detectron2 does. Raises
    :class:`LaunchError` when the job fails, ValueError for bad arguments.
    """
    _positive("num_gpus_per_machine", num_gpus_per_machine)
    _positive("num_machines", num_machines)
    if not isinstance(machine_rank, int) or not 0 <= machine_rank < num_machines:
        raise ValueError(f"machine_rank={machine_rank!r}: expected 0..{num_machines - 1}")
    if not isinstance(max_restarts, int) or max_restarts < 0:
        raise ValueError(f"max_restarts={max_restarts!r}: expected an integer >= 0")
    if os.environ.get(WORKER_ENV) == "1":
        return _run_worker(main_func, num_gpus_per_machine, num_machines, machine_rank, args,
                           timeout)
    if num_machines * num_gpus_per_machine == 1:
        main_func(*args)
        return None
    command = _agent_command(num_gpus_per_machine, num_machines, machine_rank, dist_url,
                             max_restarts, job_id)
    env = dict(os.environ, **{WORKER_ENV: "1", "PYTHON_EXEC": sys.executable})
    agent = subprocess.Popen(command, env=env)
    try:
        exit_code = agent.wait()
    except KeyboardInterrupt:
        # Ctrl-C reached ddp-client too (one process group): it stops the workers and leaves
        # the job; wait for that rather than kill it.
        agent.wait()
        raise
    if exit_code != 0:
        raise LaunchError(f"the job of {os.path.basename(command[-1])} failed: ddp-client "
                          f"exited with {exit_code} (its log above names the root cause)",
                          exit_code)
    return None


def _agent_command(num_gpus, num_machines, machine_rank, dist_url, max_restarts, job_id):
    """The ddp-client command line that runs this script as the job's workers."""
    agent = os.environ.get("DDP_CLIENT") or shutil.which("ddp-client")
    if not agent:
        raise LaunchError("ddp-client not found: put it on PATH or name it in DDP_CLIENT", 2)
    command = [agent, "--nnodes", str(num_machines), "--nproc-per-node", str(num_gpus),
               "--max-restarts", str(max_restarts),
               "--node-rank", str(machine_rank),
               "--node-id", f"{socket.gethostname()}-m{machine_rank}"]
    if dist_url == "auto" or (dist_url is None and not os.environ.get("DDP_COORDINATOR")):
        if num_machines != 1:
            raise ValueError(f"dist_url={dist_url!r} works on one machine only; with "
                             f"num_machines={num_machines} name machine 0 as tcp://HOST:PORT")
        command.append("--standalone")  # the job id is the agent's own
    elif dist_url is None:
        command += ["--coordinator", os.environ["DDP_COORDINATOR"],
                    "--job", job_id or _default_job_id("")]
    else:
        url = urlparse(str(dist_url))
        try:
            port = url.port if url.scheme == "tcp" else None
        except ValueError:  # not a number, or outside 0..65535
            port = None
        if not url.hostname or not port:
            raise ValueError(f"dist_url={dist_url!r}: expected 'auto' or tcp://HOST:PORT")
        command += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{url.hostname}:{port}",
                    "--rdzv-id", job_id or _default_job_id(f"-{port}")]
    return command + _script_command()


def _default_job_id(suffix):
    """The same on every machine: the scheduler's job id (TORCHELASTIC_RUN_ID, SLURM_JOB_ID,
    ... as ddp-client reads them), else the script's name and ``suffix``."""
    for name in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "LSB_JOBID", "PBS_JOBID"):
        if os.environ.get(name):
            return re.sub(r"[^A-Za-z0-9._-]", "-", os.environ[name])[:128]
    script = os.path.splitext(os.path.basename(sys.argv[0] or "launch"))[0]
    return re.sub(r"[^A-Za-z0-9._-]", "-", f"{script}{suffix}")[:128]


def _script_command():
    """This process's own command: the script (or ``-m module``) and its arguments."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        module = spec.name[:-len(".__main__")] if spec.name.endswith(".__main__") else spec.name
        return ["-m", module] + sys.argv[1:]
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if not script or not os.path.isfile(script):
        raise LaunchError("launch() re-runs the calling script in its workers: call it from "
                          f"a script file or a -m module, not from {sys.argv[0]!r}", 2)
    return ["--run-path", script] + sys.argv[1:]


def _run_worker(main_func, num_gpus, num_machines, machine_rank, args, timeout):
    """In a worker ddp-client started: the process group, the local group, main_func."""
    import torch
    import torch.distributed as dist

    from ddp_coordinator import comm

    me = worker.info()
    world_size = num_machines * num_gpus
    if me.world_size != world_size or me.local_world_size != num_gpus:
        raise RuntimeError(f"launch(): this worker is one of {me.world_size} "
                           f"({me.local_world_size} on its machine), the call asks for "
                           f"{num_machines} x {num_gpus}")
    expected_rank = machine_rank * num_gpus + me.local_rank
    if me.rank != expected_rank:
        raise RuntimeError(f"launch(): machine_rank {machine_rank} got group rank "
                           f"{me.group_rank} from the coordinator (another machine holds "
                           f"{machine_rank}): global rank {me.rank}, not {expected_rank}")
    if torch.cuda.is_available():
        if num_gpus > torch.cuda.device_count():
            raise RuntimeError(f"launch(): num_gpus_per_machine={num_gpus} but this machine "
                               f"has {torch.cuda.device_count()} GPUs")
        torch.cuda.set_device(me.local_rank)
        backend = "nccl"
    else:
        backend = "gloo"
    dist.init_process_group(backend, init_method="env://", world_size=world_size,
                            rank=me.rank, timeout=timeout)
    comm.create_local_process_group(num_gpus)
    comm.synchronize()
    try:
        return main_func(*args)
    finally:
        dist.destroy_process_group()
