"""A node agent's session with the coordinator (proto/ddp/v1/session.proto), in Python.

ddp-client speaks this protocol in C++; :mod:`ddp_coordinator.torchrun` speaks it from inside
torchrun's agent. One bidirectional stream per node: the session registers the node, sends
heartbeats from a background thread, and keeps the coordinator's orders (the master-info
request, the assignment, a stop, the job's end) for its owner to act on::

    session = AgentSession(connection, register)      # a session_pb2.Register
    registered = session.open(timeout=60)
    session.wait_until(lambda s: s.assignment is not None, timeout=600)
    session.send(session.worker_exited(generation, local_rank=0, exit_code=0))
    session.close(leave_reason="done")

A stream that breaks (a coordinator restart or failover, a dropped connection) is resumed as
ddp-client resumes: the same incarnation registers again, on the next endpoint or the named
leader, with a short backoff, for up to ``resume_timeout``; the failure reports and the
WorkersStopped of the running generation are sent again (the coordinator counts each once).
A resume that finds the node's place gone (``Registered.resumed`` false) sets ``superseded``.
A refusal a retry cannot fix (ABORTED, FAILED_PRECONDITION, ...) sets ``error``. It grants
itself no lease (it never freezes workers: its owner does not run them).

Thread-safety: every method may be called from any thread; the state fields are read under
``condition`` (``wait_until`` does so).
"""
import logging
import queue
import random
import threading
import time

import grpc

from ddp_coordinator import errors
from ddp_coordinator._proto import session_pb2, session_pb2_grpc

_log = logging.getLogger(__name__)

# Until Registered names the job's heartbeat interval (JobSettings' default, 500 ms).
_DEFAULT_HEARTBEAT_INTERVAL_S = 0.5
_RESUME_BACKOFF_S = (0.1, 0.5)  # first and longest wait between attempts, as ddp-client's
# Codes a new attempt cannot fix: the coordinator refused the node or its message.
_PERMANENT = {grpc.StatusCode.ABORTED, grpc.StatusCode.INVALID_ARGUMENT,
              grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND,
              grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ALREADY_EXISTS,
              grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.PERMISSION_DENIED,
              grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNIMPLEMENTED}


class SessionEnded(errors.CoordinatorError):
    """The session's stream ended: the coordinator refused a message or went away."""


class AgentSession:
    """One node's session. ``register`` is the node's Register message (job, node id, nproc,
    address, settings, token); the incarnation is chosen here, fresh per session.

    State, under ``condition``: ``registered`` (Registered), ``assignment`` (the latest
    Assignment), ``master_requested`` (the generation whose RequestMasterInfo is not yet
    answered, 0: none), ``stop_requested`` (the generation of the latest StopWorkers, 0:
    none), ``finished`` (JobFinished), ``dismissed`` (NodeDismissed's reason) and ``error``
    (a :class:`~ddp_coordinator.errors.CoordinatorError` that ended the session) and
    ``superseded`` (the generation whose place a resume found gone, 0: none).
    """

    def __init__(self, connection, register, resume_timeout=600.0):
        self._connection = connection
        self.register = session_pb2.Register()
        self.register.CopyFrom(register)
        self.register.incarnation = random.getrandbits(64) or 1
        self.condition = threading.Condition()
        self.registered = None
        self.assignment = None
        self.master_requested = 0
        self.stop_requested = 0
        self.finished = None
        self.dismissed = None
        self.error = None
        self.superseded = 0
        self.generation = 0  # the last generation this node's workers ran (NodeHeader)
        self._resume_timeout = resume_timeout
        self._outbox = queue.Queue()  # the current stream's; a new one per stream
        self._call = None
        self._closing = False
        self._threads = []
        # What a resumed stream sends again: this generation's failure reports and its
        # WorkersStopped (the coordinator counts each once).
        self._replay_generation = 0
        self._replay = []
        self._resuming = False

    # ---- Lifecycle ----

    def open(self, timeout):
        """Opens the stream, registers and waits for Registered; returns it. Raises the
        coordinator's refusal (a CoordinatorError subclass: FailedPreconditionError for
        flags that contradict the job's, AlreadyExistsError for a node id a live agent
        uses, ...) or DeadlineExceededError after ``timeout`` seconds."""
        endpoint = self._start_stream()
        runner = threading.Thread(target=self._run, args=(endpoint,),
                                  name="ddp-session-reader", daemon=True)
        runner.start()
        self._threads.append(runner)
        if not self.wait_until(lambda s: s.registered is not None, timeout):
            self.close()
            raise errors.DeadlineExceededError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"no answer to Register of job {self.register.job_id!r} from {endpoint} "
                f"within {timeout:g} s")
        if self.registered is None:
            raise self.error
        beater = threading.Thread(target=self._heartbeat, name="ddp-session-heartbeat",
                                  daemon=True)
        beater.start()
        self._threads.append(beater)
        return self.registered

    def close(self, leave_reason=None):
        """Ends the session: with ``leave_reason``, the node leaves the job for good first
        (Leave); without, the stream just closes (a finished job needs no Leave)."""
        with self.condition:
            if self._closing:
                return
            if leave_reason is not None and self.error is None:
                self._outbox.put(session_pb2.AgentMessage(
                    leave=session_pb2.Leave(header=self.header(self.generation),
                                            reason=leave_reason)))
            self._closing = True
            self.condition.notify_all()
        self._outbox.put(None)  # ends the request stream: the server sees a half-close
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5)
        if self._call is not None:
            self._call.cancel()

    # ---- Messages ----

    def header(self, generation):
        return session_pb2.NodeHeader(job_id=self.register.job_id,
                                      node_id=self.register.node_id,
                                      incarnation=self.register.incarnation,
                                      generation=generation)

    def send(self, message):
        """Queues an AgentMessage (its header already set); raises the error that ended the
        stream, if one did."""
        with self.condition:
            if self.error is not None:
                raise self.error
            if self._closing:
                raise SessionEnded(grpc.StatusCode.CANCELLED, "the session is closed")
            kind = message.WhichOneof("body")
            if kind in ("worker_exited", "workers_stopped"):
                generation = getattr(message, kind).header.generation
                if generation != self._replay_generation:
                    self._replay_generation, self._replay = generation, []
                self._replay.append(message)
            self._outbox.put(message)

    def worker_exited(self, generation, local_rank, exit_code, message="", pid=0,
                      time_unix_ms=0, signal=0):
        return session_pb2.AgentMessage(worker_exited=session_pb2.WorkerExited(
            header=self.header(generation), local_rank=local_rank, exit_code=exit_code,
            signal=signal, error_message=message, pid=pid, time_unix_ms=time_unix_ms))

    def workers_stopped(self, generation):
        return session_pb2.AgentMessage(
            workers_stopped=session_pb2.WorkersStopped(header=self.header(generation)))

    def master_info(self, generation, master_port, master_addr=""):
        return session_pb2.AgentMessage(master_info=session_pb2.MasterInfo(
            header=self.header(generation), master_addr=master_addr, master_port=master_port))

    def wait_until(self, predicate, timeout):
        """Waits until ``predicate(self)`` holds (True), or until the stream ended or the
        session closed (whatever ``predicate`` says then), at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self.condition:
            while True:
                if predicate(self):
                    return True
                if self.error is not None or self._closing:
                    return predicate(self)
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.condition.wait(min(left, 1.0))

    # ---- Threads ----

    def _requests(self, outbox):
        while True:
            message = outbox.get()
            if message is None:
                return
            yield message

    def _start_stream(self):
        """A new stream on the current endpoint, its first message the Register (with the
        generation the workers run, for a resume); returns the endpoint."""
        endpoint = self._connection.current_endpoint
        stub = session_pb2_grpc.SessionServiceStub(self._connection._channel(endpoint))
        outbox = queue.Queue()
        with self.condition:
            self.register.generation = self.generation
            outbox.put(session_pb2.AgentMessage(register=self.register))
            self._outbox = outbox
        self._call = stub.Session(self._requests(outbox), metadata=self._connection.metadata())
        return endpoint

    def _run(self, endpoint):
        """Reads the stream; resumes it after a transient failure until resume_timeout."""
        lost_since = None
        delay = _RESUME_BACKOFF_S[0]
        while True:
            failure = self._read(endpoint)
            with self.condition:
                if self._closing or self.finished is not None or self.dismissed is not None:
                    self.condition.notify_all()
                    return
                outage_begins = not self._resuming  # a registered stream broke
                if outage_begins:
                    lost_since, delay = time.monotonic(), _RESUME_BACKOFF_S[0]
                transient = failure.code not in _PERMANENT and self.registered is not None
                if not transient or time.monotonic() - lost_since > self._resume_timeout:
                    self.error = failure
                    _log.warning("session with the coordinator ended: %s", failure)
                    self.condition.notify_all()
                    return
                self._resuming = True
            (_log.warning if outage_begins else _log.debug)(
                "session with the coordinator at %s broke (%s); resuming for up to %g s",
                endpoint, failure, self._resume_timeout)
            if not self._connection.stream_failed(endpoint, failure):
                time.sleep(delay)
                delay = min(delay * 2, _RESUME_BACKOFF_S[1])
            self._outbox.put(None)  # ends the old stream's requests
            with self.condition:
                if self._closing:  # closed while waiting: no new stream
                    return
            endpoint = self._start_stream()

    def _read(self, endpoint):
        """Handles the replies of the current stream; returns why it ended."""
        try:
            for reply in self._call:
                self._handle(reply)
            return SessionEnded(grpc.StatusCode.UNAVAILABLE,
                                f"the coordinator at {endpoint} ended the session")
        except grpc.RpcError as error:
            return errors.from_rpc_error(error, endpoint)

    def _handle(self, reply):
        kind = reply.WhichOneof("body")
        with self.condition:
            if kind == "registered":
                if self._resuming:
                    self._resumed(reply.registered)
                self.registered = reply.registered
            elif kind == "assignment":
                self.assignment = reply.assignment
            elif kind == "request_master_info":
                self.master_requested = reply.request_master_info.generation
            elif kind == "stop_workers":
                self.stop_requested = reply.stop_workers.generation
                _log.info("the coordinator stops generation %d: %s",
                          reply.stop_workers.generation, reply.stop_workers.reason)
            elif kind == "job_finished":
                self.finished = reply.job_finished
            elif kind == "node_dismissed":
                self.dismissed = reply.node_dismissed.reason or "dismissed"
            elif kind == "notice":
                _log.warning("coordinator: %s", reply.notice.message)
            self.condition.notify_all()

    def _resumed(self, registered):
        """A Registered on a resumed stream (under ``condition``)."""
        self._resuming = False
        if registered.resumed:
            _log.warning("session resumed; the workers of generation %d go on",
                         self.generation)
            if self._replay_generation == self.generation:
                for message in self._replay:
                    self._outbox.put(message)
        elif self.generation:
            _log.warning("the coordinator no longer counts this node in generation %d: it "
                         "joins the next one", self.generation)
            self.superseded = self.generation

    def _heartbeat(self):
        with self.condition:
            interval_ms = self.registered.settings.heartbeat_interval_ms
        interval = interval_ms / 1000.0 if interval_ms > 0 else _DEFAULT_HEARTBEAT_INTERVAL_S
        while True:
            with self.condition:
                if self.condition.wait_for(lambda: self._closing or self.error is not None,
                                           interval):
                    return
                message = session_pb2.AgentMessage(
                    heartbeat=session_pb2.Heartbeat(header=self.header(self.generation)))
                self._outbox.put(message)
