"""The training script's side: who am I, is my generation current, the heartbeat, and the
job's key namespace. Reads the environment that ddp-client (and torchrun) give every worker
(docs/worker-contract.md); works under plain torchrun too, where the DDP_* variables are
absent.

    from ddp_coordinator import worker

    me = worker.info()                 # job, generation, ranks, restart count
    for step in range(steps):
        worker.heartbeat()             # opt in to hang detection
        ...
        if me.rank == 0 and worker.generation_is_current():
            save_checkpoint()
            worker.report_checkpoint(step)  # the work before it is safe
"""
import dataclasses
import json
import math
import os
import time


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """This worker's place in the job, from its environment (torchrun's variables and
    ddp-client's DDP_*). ``generation`` is 0 and ``coordinator`` '' outside ddp-client."""
    job_id: str
    generation: int
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    group_rank: int
    group_world_size: int
    role: str
    role_rank: int
    role_world_size: int
    restart_count: int
    max_restarts: int
    master_addr: str
    master_port: int
    coordinator: str

    @property
    def is_main_process(self):
        """True for global rank 0."""
        return self.rank == 0


def _int(env, name, default=0):
    value = env.get(name, "")
    try:
        return int(value) if value != "" else default
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def info(environ=None):
    """This worker's :class:`WorkerInfo`, read from ``environ`` (default ``os.environ``).
    Unset variables take a single process's values (rank 0 of 1)."""
    env = os.environ if environ is None else environ
    rank = _int(env, "RANK")
    world_size = _int(env, "WORLD_SIZE", 1)
    return WorkerInfo(
        job_id=env.get("DDP_JOB") or env.get("TORCHELASTIC_RUN_ID", ""),
        generation=_int(env, "DDP_GENERATION"),
        rank=rank,
        local_rank=_int(env, "LOCAL_RANK"),
        world_size=world_size,
        local_world_size=_int(env, "LOCAL_WORLD_SIZE", 1),
        group_rank=_int(env, "GROUP_RANK"),
        group_world_size=_int(env, "GROUP_WORLD_SIZE", 1),
        role=env.get("ROLE_NAME", "default"),
        role_rank=_int(env, "ROLE_RANK", rank),
        role_world_size=_int(env, "ROLE_WORLD_SIZE", world_size),
        restart_count=_int(env, "TORCHELASTIC_RESTART_COUNT"),
        max_restarts=_int(env, "TORCHELASTIC_MAX_RESTARTS"),
        master_addr=env.get("MASTER_ADDR", ""),
        master_port=_int(env, "MASTER_PORT"),
        coordinator=env.get("DDP_COORDINATOR", ""),
    )


def generation_is_current(margin_s=0.5, environ=None):
    """Whether this worker's generation may still act outside the job, e.g. write a
    checkpoint.

    Under ddp-client the agent publishes its lease in ``DDP_LEASE_FILE`` (a JSON object:
    generation, current, valid_until_monotonic). The generation is current while the
    coordinator runs it, no stop of it has begun, and the lease does not end within
    ``margin_s`` on CLOCK_MONOTONIC (``time.monotonic()``). A node cut off from the
    coordinator freezes its workers when its lease ends, and the next generation may start
    without it soon after: a worker whose generation is not current must not write shared
    state. Choose ``margin_s`` longer than the write takes. Under torchrun there is no lease
    file, and nothing to check (True). An unreadable file answers False.
    """
    env = os.environ if environ is None else environ
    path = env.get("DDP_LEASE_FILE")
    if not path:
        return True
    try:
        with open(path) as f:
            lease = json.load(f)
    except (OSError, ValueError):
        return False
    if not isinstance(lease, dict) or not lease.get("current"):
        return False
    if lease.get("generation") != _int(env, "DDP_GENERATION"):
        return False
    until = lease.get("valid_until_monotonic")
    return until is None or time.monotonic() + margin_s < until


def heartbeat(environ=None):
    """Touches ``DDP_HEARTBEAT_FILE`` (updates its mtime). Once a worker called it, the agent
    counts going longer than ``--worker-heartbeat-timeout`` without it as a hang. Call it at
    least once per step (before and after a collective is best: a hung peer then shows as
    the older heartbeat). Returns False where there is no heartbeat file (torchrun)."""
    env = os.environ if environ is None else environ
    path = env.get("DDP_HEARTBEAT_FILE")
    if not path:
        return False
    with open(path, "a"):
        os.utime(path, None)
    return True


MAX_PROGRESS_METRICS = 16
MAX_METRIC_NAME_BYTES = 64


def report_progress(step, environ=None, **metrics):
    """Tells the coordinator how far this worker got: ``report_progress(step, loss=0.31,
    samples_per_s=5120)``. The agent reads the report at most every few seconds and relays
    it; ``ddpctl jobs get``, REST and the dashboard show each rank's step, steps per second
    (from two reports) and metrics. Also a heartbeat (see :func:`heartbeat`): a rank that
    reported and then stops reporting is found hung after the worker heartbeat timeout,
    with no heartbeat file in the script.

    ``step`` is a non-negative int; metrics are numbers (at most 16, names of at most 64
    bytes: the others are dropped by the agent, so a report is never refused). Cheap enough
    to call every step: one small file written and renamed. Returns False where there is no
    agent to read it (under plain torchrun)."""
    env = os.environ if environ is None else environ
    path = env.get("DDP_PROGRESS_FILE")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step is {step!r}; it must be a non-negative int")
    values = {}
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"metric {name!r} is {value!r}; metrics must be numbers")
        values[name] = float(value)
    if not path:
        return False
    # proto3 JSON of ddp.v1.WorkerProgress; non-finite numbers as its strings.
    encoded = {k: (v if math.isfinite(v) else ("NaN" if math.isnan(v) else
                                                ("Infinity" if v > 0 else "-Infinity")))
               for k, v in values.items()}
    report = _reports.setdefault(path, {})
    report["step"] = step
    report["metrics"] = encoded
    _write_report(path, report)
    heartbeat(env)
    return True


# The last report written to each progress file (its checkpoint stays in the reports after it).
_reports = {}


def _write_report(path, report):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(report, f)
    os.replace(tmp, path)


def report_checkpoint(step=None, environ=None):
    """Tells the coordinator that this worker's checkpoint was written now (call it right
    after the write; from the rank that writes it, or from every rank). ``step`` is the
    checkpoint's step, a non-negative int; None: the last step given to
    :func:`report_progress` (0 before any).

    At a failure the coordinator counts the work since the generation's newest checkpoint as
    lost ("work lost since the last checkpoint": ``ddpctl jobs get``, the API's
    ``Job.time``, the dashboard, ``ddp_lost_seconds_total{kind="since_checkpoint"}``); once a
    job reported a checkpoint, a generation that fails before its first one loses all its
    training. A job that never calls it has no such count. The report travels with the
    progress reports (the agent reads them every ``--progress-interval``, 5 s by default):
    a checkpoint written less than that before a failure may not be seen in time, and the
    previous one counts. Returns False where there is no agent (plain torchrun)."""
    env = os.environ if environ is None else environ
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise ValueError(f"checkpoint step is {step!r}; it must be a non-negative int or None")
    path = env.get("DDP_PROGRESS_FILE")
    if not path:
        return False
    report = _reports.setdefault(path, {"step": 0, "metrics": {}})
    report["checkpoint_unix_ms"] = int(time.time() * 1000)
    report["checkpoint_step"] = report["step"] if step is None else step
    _write_report(path, report)
    return True


@dataclasses.dataclass(frozen=True)
class PreemptionNotice:
    """A node of the job leaves (a drain, a preemption): ``node_id`` (perhaps this worker's
    own), by ``leave_at`` (Unix seconds) at the latest, and why."""
    node_id: str
    leave_at: float
    reason: str
    generation: int


def preemption_notice(environ=None):
    """The :class:`PreemptionNotice` the agent wrote in ``DDP_PREEMPTION_NOTICE_FILE`` while a
    node of this generation is about to leave (``ddpctl nodes drain``, a SIGTERM to an agent
    with ``--preemption-grace``, the cloud's notice file), else None. Every worker of the job
    gets it, on every node. None under plain torchrun."""
    env = os.environ if environ is None else environ
    path = env.get("DDP_PREEMPTION_NOTICE_FILE")
    if not path:
        return None
    try:
        with open(path) as f:
            notice = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):  # being replaced: a notice all the same
        return PreemptionNotice("", 0.0, "unreadable notice", _int(env, "DDP_GENERATION"))
    return PreemptionNotice(
        node_id=str(notice.get("node_id", "")),
        leave_at=float(notice.get("leave_at_unix_ms", 0)) / 1000.0,
        reason=str(notice.get("reason", "")),
        generation=int(notice.get("generation", 0)),
    )


def preemption_pending(environ=None):
    """True while a node of this generation is about to leave: write a checkpoint, then call
    :func:`ready_to_leave` on every rank. Cheap (one ``stat``): call it every step. The job goes
    on without the node (a hot spare, or fewer nodes) once every worker said it is ready, or
    when the grace ends; no restart is counted. False under plain torchrun."""
    env = os.environ if environ is None else environ
    path = env.get("DDP_PREEMPTION_NOTICE_FILE")
    return bool(path) and os.path.exists(path)


def ready_to_leave(environ=None):
    """Tells the agent this worker is ready for the announced departure (its checkpoint is
    written; when one rank writes it, call this after a barrier that follows the write). Once
    every worker of the generation said so, the coordinator restarts the job without the
    leaving node at once instead of at the end of the grace. The worker may keep training
    meanwhile; it is stopped (SIGTERM) when the job goes on. Returns False where there is no
    agent (plain torchrun)."""
    env = os.environ if environ is None else environ
    path = env.get("DDP_PREEMPTION_READY_FILE")
    if not path:
        return False
    with open(path, "a"):
        pass
    return True


def kv(environ=None, **client_options):
    """The job's key namespace (named after the job id), over a client with the worker's
    coordinator and token (``DDP_COORDINATOR``, ``DDP_TOKEN``, ``DDP_TLS_*``). A job's token
    may use only its own namespace. ValueError outside a job (no DDP_JOB)."""
    from ddp_coordinator.client import Client  # grpc only when used

    env = os.environ if environ is None else environ
    job = env.get("DDP_JOB")
    if not job:
        raise ValueError("DDP_JOB is not set: worker.kv() needs a worker started by ddp-client")
    client_options.setdefault("token", env.get("DDP_TOKEN", ""))
    client = Client(env.get("DDP_COORDINATOR") or None, **client_options)
    return client.kv(job)
