"""torchrun with the coordinator as its rendezvous: ``--rdzv-backend ddp``.

    torchrun --rdzv-backend ddp --rdzv-endpoint COORD:29400 --rdzv-id JOB \\
             --nnodes 2 --nproc-per-node 8 --max-restarts 3 train.py      # PyTorch >= 2.5
    python3 -m ddp_coordinator.torchrun --rdzv-backend ddp ...            # any PyTorch

Each torchrun agent is a node of the coordinator's job ``--rdzv-id`` (created by the first
agent with torchrun's flags: ``--nnodes`` MIN:MAX, ``--nproc-per-node``, ``--max-restarts`` as
the job-wide restart budget). The coordinator closes the rendezvous, numbers the nodes, asks
group rank 0 for its store's port and pushes the assignment; it watches every agent's
heartbeats; the job shows in ``ddpctl jobs get``, REST and the dashboard like one of
ddp-client's.

- A worker fails: that agent restarts its group and calls ``next_rendezvous``; the handler
  reports the failure (local rank, exit code, pid and error-file message, taken from the
  agent's RunResult) and the coordinator stops every node's workers: the other agents see it
  through ``num_nodes_waiting()`` at their next monitor tick (``--monitor-interval``) and
  re-rendezvous too, without spending their own ``--max-restarts``.
- The coordinator fails the job (budget spent) or a scheduler cancels it: the rendezvous is
  closed (``RendezvousClosedError``), every agent stops.
- The agent ends: ``shutdown()`` reports its workers' exits (0 on success) and leaves.
- The coordinator restarts or fails over: the session resumes (same incarnation) and the
  workers go on, as under ddp-client (whose agents also freeze cut-off workers: torchrun's
  are not frozen).

The c10d Store torchrun's agents share (rank assignment, master address, exit barrier) is a
TCPStore that group rank 0's agent serves, as torchrun's own c10d backend does; the
coordinator hands its address to every node in the assignment; its keys are scoped per job
and generation. :func:`generation_store` is the one place that makes it.

``--rdzv-conf`` keys (all optional): ``node_id`` (default: the host name; two agents on one
host need two), ``local_addr`` (how other nodes reach this one; default: the FQDN),
``nproc_per_node`` and ``max_restarts`` (default: torchrun's own flags), ``join_timeout``
(alias ``timeout``) and ``last_call_timeout`` in seconds, ``read_timeout`` (the store's,
default 60 s). The token and TLS come from ``DDP_TOKEN`` and ``DDP_TLS_*`` as for ddpctl.
"""
import contextlib
import datetime
import io
import logging
import socket
import sys
import time

from torch.distributed import PrefixStore, TCPStore
from torch.distributed.elastic.rendezvous import api as rdzv_api
from torch.distributed.elastic.rendezvous import (RendezvousClosedError,
                                                  RendezvousConnectionError, RendezvousHandler,
                                                  RendezvousParameters, RendezvousTimeoutError)

from ddp_coordinator import errors
from ddp_coordinator._connection import Connection
from ddp_coordinator._proto import jobs_pb2, session_pb2
from ddp_coordinator.agent_session import AgentSession

BACKEND = "ddp"
DEFAULT_PORT = 29400
_DEFAULT_JOIN_TIMEOUT_S = 600
_DEFAULT_READ_TIMEOUT_S = 60
# What one WorkerExited message may carry (the coordinator caps it again).
_MAX_MESSAGE_CHARS = 4096
_FAILURE_NOT_NAMED = ("torchrun's agent restarted its worker group (the failed worker was not "
                      "found in the agent's run result)")

_log = logging.getLogger(__name__)


def _endpoints(endpoint):
    """torchrun's --rdzv-endpoint (HOST[:PORT][,...]) with the coordinator's default port."""
    if not endpoint or not endpoint.strip():
        raise ValueError("--rdzv-endpoint is required with --rdzv-backend ddp: the "
                         f"coordinator's HOST[:PORT] (port {DEFAULT_PORT} when left out)")
    result = []
    for item in endpoint.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if not sep:
            result.append(f"{item}:{DEFAULT_PORT}")
            continue
        if not host:
            raise ValueError(f"--rdzv-endpoint {endpoint!r}: {item!r} names no host")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"--rdzv-endpoint {endpoint!r}: port {port!r} is not in 1..65535")
        result.append(item)
    return result


def _seconds(params, *keys, default):
    for key in keys:
        value = params.get(key)
        if value is None or value == "":
            continue
        try:
            seconds = float(str(value).rstrip("s"))
        except ValueError:
            raise ValueError(f"--rdzv-conf {key}={value!r}: expected seconds") from None
        if seconds <= 0:
            raise ValueError(f"--rdzv-conf {key}={value!r}: must be more than 0 seconds")
        return seconds
    return default


def _torchrun_flags():
    """torchrun's own --nproc-per-node and --max-restarts, read from its command line (the
    handler is created inside torchrun's process, which tells its rendezvous neither);
    (None, None) when the process is not torchrun."""
    try:
        from torch.distributed import run as torch_run
        with contextlib.redirect_stderr(io.StringIO()):
            args, _ = torch_run.get_args_parser().parse_known_args(sys.argv[1:])
        nproc = torch_run.determine_local_world_size(args.nproc_per_node)
        return nproc, args.max_restarts
    except (SystemExit, Exception):  # argparse exits on a foreign command line
        return None, None


def _conf_int(params, key, fallback, what):
    value = params.get(key)
    if value is None or value == "":
        if fallback is None:
            raise ValueError(f"--rdzv-conf {key}=N is required here: {what} is not known "
                             "from torchrun's command line")
        return int(fallback)
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"--rdzv-conf {key}={value!r}: expected an integer") from None
    if number < 0:
        raise ValueError(f"--rdzv-conf {key}={value!r}: must not be negative")
    return number


def generation_store(job_id, generation, assignment, hosted_store, timeout):
    """The c10d Store torchrun's agents share in one generation: a TCPStore at the
    assignment's master address and port (served by group rank 0's agent, which passes its
    ``hosted_store``), its keys under ``ddp/JOB/GENERATION/`` so nothing of one generation
    is read in the next."""
    if hosted_store is not None:
        base = hosted_store
    else:
        base = TCPStore(assignment.master_addr, assignment.master_port, None, False,
                        timeout=timeout, wait_for_workers=False)
    return PrefixStore(f"ddp/{job_id}/{generation}/", base)


def _run_result_of_calling_agent():
    """The RunResult of torchrun's agent that called into the handler (``run_result`` in
    the agent's monitor loop, ``result`` where launch_agent shuts the rendezvous down);
    None when the caller is not torchrun's agent. torchrun tells a rendezvous handler
    neither which worker failed nor whether the run succeeded."""
    frame = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            return None
        for name in ("run_result", "result"):
            value = frame.f_locals.get(name)
            if hasattr(value, "failures") and hasattr(value, "state"):
                return value
        frame = frame.f_back
    return None


class CoordinatorRendezvousHandler(RendezvousHandler):
    """torchrun's RendezvousHandler over the coordinator's session API (one node's)."""

    def __init__(self, params: RendezvousParameters):
        self._job_id = params.run_id
        if not self._job_id:
            raise ValueError("--rdzv-id is required with --rdzv-backend ddp: the job id")
        torchrun_nproc, torchrun_restarts = _torchrun_flags()
        self._nproc = _conf_int(params, "nproc_per_node", torchrun_nproc, "--nproc-per-node")
        if self._nproc < 1:
            raise ValueError(f"nproc_per_node {self._nproc}: must be at least 1")
        max_restarts = _conf_int(params, "max_restarts", torchrun_restarts or 0, "")
        self._node_id = str(params.get("node_id") or socket.gethostname())
        self._address = str(params.get("local_addr") or socket.getfqdn())
        self._join_timeout = _seconds(params, "join_timeout", "timeout",
                                      default=_DEFAULT_JOIN_TIMEOUT_S)
        last_call = _seconds(params, "last_call_timeout", default=None)
        self._store_timeout = datetime.timedelta(
            seconds=_seconds(params, "read_timeout", default=_DEFAULT_READ_TIMEOUT_S))
        settings = jobs_pb2.JobSettings(
            min_nodes=params.min_nodes, max_nodes=params.max_nodes,
            nproc_per_node=self._nproc, max_restarts=max_restarts,
            join_timeout_ms=int(self._join_timeout * 1000),
            last_call_timeout_ms=int(last_call * 1000) if last_call else 0)
        self._connection = Connection(_endpoints(params.endpoint))
        self._register = session_pb2.Register(
            job_id=self._job_id, node_id=self._node_id, nproc=self._nproc,
            requested_rank=-1, address=self._address, settings=settings,
            agent_version="ddp_coordinator.torchrun", token=self._connection.token)
        self._session = None
        self._hosted_store = None
        self._generation = 0  # of the workers torchrun started after the last rendezvous
        self._reported = False  # a failure of self._generation was reported
        self._closed = False

    # ---- RendezvousHandler ----

    def get_backend(self) -> str:
        return BACKEND

    def get_run_id(self) -> str:
        return self._job_id

    @property
    def use_agent_store(self) -> bool:
        # Workers get a fresh MASTER_PORT and their rank 0 serves their own store.
        return False

    def next_rendezvous(self):
        """Joins the job (first call) or the next generation, and returns this node's
        store, group rank and group world size (a RendezvousInfo where torch has one)."""
        if self._closed:
            raise RendezvousClosedError(f"the rendezvous of job {self._job_id} is closed")
        deadline = time.monotonic() + self._join_timeout
        session = self._open_session()
        if self._generation:
            self._leave_generation(session, deadline)
        assignment = self._await_assignment(session, deadline)
        self._generation = assignment.generation
        self._reported = False
        with session.condition:
            session.generation = assignment.generation
        store = generation_store(self._job_id, assignment.generation, assignment,
                                 self._hosted_store if assignment.group_rank == 0 else None,
                                 self._store_timeout)
        _log.info("job %s generation %d: group rank %d of %d (restart %d of %d)", self._job_id,
                  assignment.generation, assignment.group_rank, assignment.group_world_size,
                  assignment.restart_count, assignment.max_restarts)
        return self._rendezvous_result(store, assignment)

    def is_closed(self) -> bool:
        if self._closed:
            return True
        session = self._session
        return session is not None and (session.finished is not None or
                                        session.dismissed is not None)

    def set_closed(self):
        """Closes the rendezvous for this agent: its next rendezvous raises
        RendezvousClosedError. Ending the job for every node is the coordinator's (the job's
        budget, ``ddpctl jobs cancel``)."""
        self._closed = True

    def num_nodes_waiting(self) -> int:
        """1 while the coordinator wants this node's workers stopped (a restart, a node that
        joined or left, the job's end), else 0: torchrun's agent then re-rendezvouses."""
        session = self._session
        if session is None or not self._generation:
            return 0
        with session.condition:
            pending = (session.stop_requested >= self._generation or
                       session.superseded >= self._generation or
                       session.finished is not None or session.dismissed is not None or
                       session.error is not None or
                       (session.assignment is not None and
                        session.assignment.generation > self._generation))
        return 1 if pending else 0

    def shutdown(self) -> bool:
        """Reports how this node's workers ended (the agent's RunResult: 0 for each on
        success) and leaves the job. Later calls do nothing (newer torch agents call it
        from their own shutdown too)."""
        session, self._session = self._session, None
        if session is None:
            self._closed = True
            return True
        result = _run_result_of_calling_agent()
        succeeded = result is not None and not result.failures and getattr(
            result.state, "name", "") == "SUCCEEDED"
        try:
            if self._generation and session.finished is None:
                if succeeded:
                    for local_rank in range(self._nproc):
                        session.send(session.worker_exited(self._generation, local_rank, 0))
                    # Every node reports; the coordinator ends the job when the last did.
                    session.wait_until(lambda s: s.finished is not None, timeout=30)
                elif not self._reported:
                    self._report_failure(session, result)
        except errors.CoordinatorError as error:
            _log.warning("could not report the end of the workers: %s", error)
        ended = session.finished is not None
        session.close(leave_reason=None if ended else "torchrun's agent shut down")
        self._closed = True
        return True

    # ---- Steps ----

    def _open_session(self):
        if self._session is not None:
            return self._session
        session = AgentSession(self._connection, self._register)
        try:
            registered = session.open(timeout=self._join_timeout)
        except errors.CoordinatorError as error:
            raise RendezvousConnectionError(
                f"job {self._job_id}: the coordinator at {self._connection.current_endpoint} "
                f"refused or did not answer node {self._node_id!r}: {error}") from error
        _log.info("node %s joined job %s at %s (%s, generation %d%s)", self._node_id,
                  self._job_id, self._connection.current_endpoint,
                  jobs_pb2.JobState.Name(registered.state), registered.generation,
                  ", created it" if registered.created_job else "")
        self._session = session
        return session

    def _leave_generation(self, session, deadline):
        """torchrun's agent stopped its workers of ``self._generation``: the failures its
        monitor saw, or, if the coordinator did not ask for the stop, that a worker failed,
        are reported here; then WorkersStopped."""
        generation = self._generation
        if (session.finished is not None or session.dismissed is not None or
                session.superseded >= generation):
            return  # nothing to report: the coordinator ended or replaced the generation
        with session.condition:
            asked = (session.stop_requested >= generation or
                     (session.assignment is not None and
                      session.assignment.generation > generation))
        result = _run_result_of_calling_agent()
        # A worker torchrun's monitor saw fail is reported even when the coordinator asked
        # for the stop first: another node's knock-on exits (its collective broke when this
        # worker died) may have been reported before this agent's monitor looked.
        saw_failures = result is not None and bool(getattr(result, "failures", None))
        if not self._reported and (not asked or saw_failures):
            self._report_failure(session, result)
        if not asked:
            session.wait_until(lambda s: s.stop_requested >= generation or
                               s.finished is not None or s.dismissed is not None,
                               max(0.0, deadline - time.monotonic()))
        if session.stop_requested >= generation and session.finished is None:
            self._send(session, session.workers_stopped(generation))

    def _report_failure(self, session, result):
        failures = []
        if result is not None and isinstance(result.failures, dict):
            failures = sorted(result.failures.values(), key=lambda f: getattr(f, "timestamp", 0))
        reports = []
        for failure in failures:
            local_rank = getattr(failure, "local_rank", 0)
            if not 0 <= local_rank < self._nproc:
                continue
            exit_code = int(getattr(failure, "exitcode", 1) or 1)
            signal = -exit_code if exit_code < 0 else 0
            message = str(getattr(failure, "message", "") or "")[:_MAX_MESSAGE_CHARS]
            reports.append(session.worker_exited(
                self._generation, local_rank, exit_code if exit_code > 0 else 0,
                message=message, pid=int(getattr(failure, "pid", 0) or 0),
                time_unix_ms=int(getattr(failure, "timestamp", 0) or 0) * 1000, signal=signal))
        if not reports:
            reports.append(session.worker_exited(self._generation, 0, 1,
                                                 message=_FAILURE_NOT_NAMED))
        for report in reports:
            self._send(session, report)
        self._reported = True

    def _await_assignment(self, session, deadline):
        """Answers the master-info request when this node is group rank 0 and waits for an
        assignment newer than the last generation."""
        previous = self._generation

        def ready(s):
            return (s.finished is not None or s.dismissed is not None or
                    s.master_requested > previous or
                    (s.assignment is not None and s.assignment.generation > previous))

        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not session.wait_until(ready, left):
                raise RendezvousTimeoutError(
                    f"job {self._job_id}: no generation started within the join timeout "
                    f"({self._join_timeout:g} s; --rdzv-conf join_timeout=SECONDS)")
            with session.condition:
                finished, dismissed, error = session.finished, session.dismissed, session.error
                assignment = session.assignment
                master_requested = session.master_requested
            if finished is not None:
                raise RendezvousClosedError(
                    f"job {self._job_id} {jobs_pb2.JobState.Name(finished.state)}: "
                    f"{finished.message}")
            if dismissed is not None:
                raise RendezvousClosedError(f"node {self._node_id} was dismissed from job "
                                            f"{self._job_id}: {dismissed}")
            if assignment is not None and assignment.generation > previous:
                return assignment
            if error is not None:
                raise RendezvousConnectionError(f"job {self._job_id}: {error}")
            if master_requested > previous:
                self._answer_master_request(session, master_requested)

    def _answer_master_request(self, session, generation):
        """Group rank 0 serves the generation's store (one TCPStore for the agent's life)
        and names its port; the address is the one this node registered."""
        if self._hosted_store is None:
            self._hosted_store = TCPStore(self._address, 0, None, True,
                                          timeout=self._store_timeout, wait_for_workers=False)
        with session.condition:
            if session.master_requested == generation:
                session.master_requested = 0
        self._send(session, session.master_info(generation, self._hosted_store.port))

    def _send(self, session, message):
        try:
            session.send(message)
        except errors.CoordinatorError as error:
            raise RendezvousConnectionError(f"job {self._job_id}: {error}") from error

    def _rendezvous_result(self, store, assignment):
        info_class = getattr(rdzv_api, "RendezvousInfo", None)
        if info_class is None:  # torch < 2.4: a tuple
            return store, assignment.group_rank, assignment.group_world_size
        # torch >= 2.4: the workers' MASTER_ADDR/PORT travel as bootstrap store info.
        bootstrap = self._bootstrap_store_info(store, assignment.group_rank)
        return info_class(store, assignment.group_rank, assignment.group_world_size, bootstrap)

    def _bootstrap_store_info(self, store, group_rank):
        """Where the workers' rank 0 will serve their store: a free port of group rank 0's
        host, shared through the generation's store."""
        if group_rank == 0:
            with socket.socket() as probe:
                probe.bind(("", 0))
                port = probe.getsockname()[1]
            store.set("bootstrap/master_addr", self._address)
            store.set("bootstrap/master_port", str(port))
        addr = store.get("bootstrap/master_addr").decode()
        port = int(store.get("bootstrap/master_port").decode())
        return rdzv_api.RendezvousStoreInfo(addr, port)


def create_handler(params: RendezvousParameters) -> RendezvousHandler:
    """torchrun's handler creator for ``--rdzv-backend ddp``."""
    return CoordinatorRendezvousHandler(params)


def handler_creator():
    """The ``torchrun.handlers`` entry point (PyTorch >= 2.5 calls it for the creator)."""
    return create_handler


def register():
    """Registers ``--rdzv-backend ddp`` with torchrun (for PyTorch before 2.5, which
    discovers no entry points); registering twice is harmless."""
    rdzv_api.rendezvous_handler_registry.register(BACKEND, create_handler)


def main(argv=None):
    """``python3 -m ddp_coordinator.torchrun ARGS``: torchrun with ``ddp`` registered."""
    from torch.distributed import run as torch_run

    register()
    torch_run.main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    # Through the imported module, so that the registered creator is the one an entry
    # point would load (not a second copy living in __main__).
    from ddp_coordinator.torchrun import main as _main

    _main()
