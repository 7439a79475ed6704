"""The scheduler's client: jobs, the key-value store and the cluster, over gRPC.

    import ddp_coordinator as ddpc

    client = ddpc.Client("c1:29400,c2:29400,c3:29400")   # or $DDP_COORDINATOR
    job = client.jobs.create("train-42", ddpc.JobSettings(min_nodes=2, nproc_per_node=8))
    for event in client.jobs.watch("train-42", from_index=1):
        print(event.index, event.type.name, event.message)

Endpoints, token and TLS default to the environment that ddpctl reads: ``DDP_COORDINATOR``
(``HOST[:PORT][,...]``, port 29400 when none is given, else localhost:29400), ``DDP_TOKEN``,
``DDP_TLS_CA``, ``DDP_TLS_CERT``, ``DDP_TLS_KEY``. Errors raise
:class:`ddp_coordinator.CoordinatorError` subclasses carrying the gRPC code and message.
"""
import time

import grpc

from ddp_coordinator import errors, types
from ddp_coordinator._connection import Connection
from ddp_coordinator._proto import (cluster_pb2, cluster_pb2_grpc, jobs_pb2, jobs_pb2_grpc, kv_pb2,
                                    kv_pb2_grpc)


def _bytes(value):
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"expected str or bytes, got {type(value).__name__}")


class Client:
    """A connection to the coordinators of one deployment.

    Args:
        coordinator: ``"HOST[:PORT][,...]"`` (port 29400 by default) or a list; for
            coordinators in HA, all of them (calls follow the leader). Default:
            ``$DDP_COORDINATOR``, else localhost:29400.
        token: bearer token for a coordinator with authorization (default ``$DDP_TOKEN``).
        tls_ca, tls_cert, tls_key: PEM files; with ``tls_ca`` the connection uses TLS, with
            the certificate and key too, mTLS (defaults ``$DDP_TLS_CA``, ``$DDP_TLS_CERT``,
            ``$DDP_TLS_KEY``).
        timeout: seconds each call may take (a KV wait adds its own timeout).
        retry_rounds: how many times an UNAVAILABLE call goes round the endpoint list before
            it raises :class:`UnavailableError`. Every call is retried, writes included:
            UNAVAILABLE means the coordinator did not apply it (a standby's redirect, no
            connection, a store that could not commit).

    Thread-safe; use it as a context manager or call :meth:`close`.
    """

    def __init__(self, coordinator=None, *, token=None, tls_ca=None, tls_cert=None,
                 tls_key=None, timeout=10.0, retry_rounds=2):
        self._connection = Connection(coordinator, token=token, tls_ca=tls_ca,
                                      tls_cert=tls_cert, tls_key=tls_key, timeout=timeout,
                                      retry_rounds=retry_rounds)
        self.jobs = Jobs(self._connection)

    @property
    def endpoints(self):
        """The coordinator endpoints this client was given."""
        return self._connection.endpoints

    def kv(self, namespace="default"):
        """The key namespace ``namespace`` (a job's keys live in the namespace of its id)."""
        return KeyValueNamespace(self._connection, namespace)

    def cluster_status(self, etcd_health=False):
        """The status of the coordinator the client talks to (every coordinator answers,
        standbys too): its role, the leader and, with ``etcd_health``, each etcd member."""
        reply = self._connection.call(cluster_pb2_grpc.ClusterServiceStub, "GetClusterStatus",
                                      cluster_pb2.GetClusterStatusRequest(etcd_health=etcd_health))
        return types.from_proto(types.ClusterStatus, reply)

    def close(self):
        """Closes the channels; watches in progress end."""
        self._connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _ResumableStream:
    """A server stream that reconnects after UNAVAILABLE (a dropped connection, a
    coordinator restart or failover), from where it stopped."""

    def __init__(self, connection, stub_class, method, make_request, convert, reconnect_delay,
                 max_reconnect_delay):
        self._connection = connection
        self._stub_class = stub_class
        self._method = method
        self._make_request = make_request  # () -> request from the resume point
        self._convert = convert  # reply -> iterable of results, advancing the resume point
        self._delay = reconnect_delay
        self._max_delay = max_reconnect_delay
        self._call = None
        self._closed = False

    def __iter__(self):
        delay = self._delay
        while not self._closed:
            call, endpoint = self._connection.stream(self._stub_class, self._method,
                                                     self._make_request())
            self._call = call
            try:
                for reply in call:
                    delay = self._delay
                    yield from self._convert(reply)
                return  # the server ended the stream (a finished job)
            except grpc.RpcError as error:
                if self._closed or error.code() == grpc.StatusCode.CANCELLED:
                    return
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    raise errors.from_rpc_error(error, endpoint) from None
                if not self._connection.stream_failed(endpoint, error):
                    time.sleep(delay)
                    delay = min(delay * 2, self._max_delay)

    def close(self):
        """Ends the watch; the iterator stops."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()


class JobWatch(_ResumableStream):
    """Iterator over a job's events; resumes after the last event seen when the connection
    drops. Ends when the job finishes; :meth:`close` ends it early."""

    def __init__(self, connection, job_id, from_index, **kwargs):
        self.job_id = job_id
        self.next_index = from_index

        def request():
            return jobs_pb2.WatchJobRequest(job_id=job_id, from_index=self.next_index)

        def convert(event):
            self.next_index = event.index + 1
            yield types.job_event_from_proto(event)

        super().__init__(connection, jobs_pb2_grpc.JobServiceStub, "WatchJob", request, convert,
                         **kwargs)


class KvWatch(_ResumableStream):
    """Iterator over the changes under a prefix; resumes after the last revision seen when
    the connection drops (OutOfRangeError if that history was compacted meanwhile: range,
    then watch from the range's revision + 1). :meth:`close` ends it."""

    def __init__(self, connection, namespace, prefix, start_revision, **kwargs):
        # The first revision still to deliver; 0: only changes after now (until the first
        # message tells the store's revision).
        self.next_revision = start_revision

        def request():
            return kv_pb2.WatchRequest(namespace=namespace, prefix=prefix,
                                       start_revision=self.next_revision)

        def convert(reply):
            for event in reply.events:
                self.next_revision = max(self.next_revision, event.kv.mod_revision + 1)
                yield types.from_proto(types.KvEvent, event)
            if not reply.events and reply.revision + 1 > self.next_revision:
                self.next_revision = reply.revision + 1  # idle progress: nothing missed

        super().__init__(connection, kv_pb2_grpc.KeyValueServiceStub, "Watch", request, convert,
                         **kwargs)


class Jobs:
    """The job API (``client.jobs``): what a scheduler does with jobs."""

    def __init__(self, connection):
        self._connection = connection

    def _call(self, method, request):
        reply = self._connection.call(jobs_pb2_grpc.JobServiceStub, method, request)
        return types.job_from_proto(reply)

    def create(self, job_id, settings=None):
        """Creates job ``job_id`` (idempotent with the same settings; AlreadyExistsError with
        others). A finished job id starts its next run. With authorization on, the result's
        ``token`` is the job's bearer token (give it to its agents as DDP_TOKEN)."""
        settings = settings or types.JobSettings()
        return self._call("CreateJob", jobs_pb2.CreateJobRequest(
            job_id=job_id, settings=settings.to_proto()))

    def get(self, job_id, run=0):
        """The job's current run (``run`` 0) or run ``run``; NotFoundError if unknown."""
        return self._call("GetJob", jobs_pb2.GetJobRequest(job_id=job_id, run=run))

    def list(self, states=(), include_past_runs=False):
        """Every job (members and spares left out), optionally only in ``states``, with the
        past runs of each job id after its current run when ``include_past_runs``."""
        reply = self._connection.call(jobs_pb2_grpc.JobServiceStub, "ListJobs",
                                      jobs_pb2.ListJobsRequest(
                                          states=[int(s) for s in states],
                                          include_past_runs=include_past_runs))
        return [types.job_from_proto(job) for job in reply.jobs]

    def past_runs(self, job_id):
        """The finished earlier runs of ``job_id``, oldest first."""
        runs = self.list(include_past_runs=True)
        current = [j for j in runs if j.job_id == job_id]
        return current[1:] if current else []

    def update(self, job_id, min_nodes=None, max_nodes=None):
        """Resizes a job to ``min_nodes``..``max_nodes``; one left None keeps the job's
        current value (read first)."""
        if min_nodes is None or max_nodes is None:
            current = self.get(job_id).settings
            min_nodes = current.min_nodes if min_nodes is None else min_nodes
            max_nodes = current.max_nodes if max_nodes is None else max_nodes
        return self._call("UpdateJob", jobs_pb2.UpdateJobRequest(
            job_id=job_id, min_nodes=min_nodes, max_nodes=max_nodes))

    def cancel(self, job_id, reason=""):
        """Cancels the job: its workers are stopped and it ends CANCELLED."""
        return self._call("CancelJob", jobs_pb2.CancelJobRequest(job_id=job_id, reason=reason))

    def exclude_node(self, job_id, node_id, reason=""):
        """Removes a node from the job (the group restarts without it; it may not rejoin)."""
        return self._call("ExcludeNode", jobs_pb2.ExcludeNodeRequest(
            job_id=job_id, node_id=node_id, reason=reason))

    def drain_node(self, node_id, grace_s=0, job_id="", reason=""):
        """Drains a node from every job it is in (or ``job_id``): its jobs go on without it
        once their workers called ``ready_to_leave()``, or after ``grace_s`` (0: 120 s); no
        restart counted. Returns (job ids, leave-at Unix ms)."""
        reply = self._connection.call(jobs_pb2_grpc.JobServiceStub, "DrainNode",
                                      jobs_pb2.DrainNodeRequest(
                                          node_id=node_id, job_id=job_id,
                                          grace_ms=int(grace_s * 1000), reason=reason))
        return list(reply.job_ids), reply.leaves_at_unix_ms

    def delete(self, job_id):
        """Forgets a finished job; FailedPreconditionError while it runs (cancel it first)."""
        self._connection.call(jobs_pb2_grpc.JobServiceStub, "DeleteJob",
                              jobs_pb2.DeleteJobRequest(job_id=job_id))

    def issue_token(self, job_id):
        """Issues a new bearer token for the job (the old one stops working); admin only.
        Returns the job with ``token`` set."""
        return self._call("IssueJobToken", jobs_pb2.IssueJobTokenRequest(job_id=job_id))

    def revoke_token(self, job_id):
        """Leaves the job without a token; admin only."""
        return self._call("IssueJobToken",
                          jobs_pb2.IssueJobTokenRequest(job_id=job_id, revoke=True))

    def watch(self, job_id, from_index=0, reconnect_delay=0.2, max_reconnect_delay=5.0):
        """Iterates over the job's events from index ``from_index`` (0: only new ones);
        resumes after the last one seen when the connection drops. Returns a
        :class:`JobWatch` (an iterator; ``close()`` ends it)."""
        return JobWatch(self._connection, job_id, from_index, reconnect_delay=reconnect_delay,
                        max_reconnect_delay=max_reconnect_delay)

    def wait(self, job_id, states=types.FINISHED_STATES, timeout=None, poll_interval=0.2):
        """Polls the job until its state is one of ``states`` (default: finished); returns it.
        DeadlineExceededError after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.get(job_id)
            if job.state in states:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.DeadlineExceededError(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"job {job_id} still {job.state.name} after {timeout} s")
            time.sleep(poll_interval)


class KeyValueNamespace:
    """The keys of one namespace (``client.kv(ns)``): put, get, range, delete,
    compare-and-set, add, wait, watch, and leases.

    Keys and values are ``bytes`` or ``str`` (encoded as UTF-8); results hold ``bytes``.
    Every write bumps the store-wide revision and is durable before the call returns.
    """

    def __init__(self, connection, namespace):
        self._connection = connection
        self.namespace = namespace

    def _call(self, method, request, timeout=None):
        return self._connection.call(kv_pb2_grpc.KeyValueServiceStub, method, request, timeout)

    def put(self, key, value, *, lease=0, if_absent=False, expected_mod_revision=None,
            return_previous=False):
        """Sets ``key`` to ``value``. ``lease``: attach to this lease. ``if_absent``: only if
        the key does not exist; ``expected_mod_revision``: only if its mod_revision is this
        (0: absent) — else FailedPreconditionError. Returns a :class:`PutResult`."""
        request = kv_pb2.PutRequest(namespace=self.namespace, key=_bytes(key),
                                    value=_bytes(value), lease=_lease_id(lease) if lease else 0,
                                    return_previous=return_previous)
        if if_absent:
            request.if_absent = True
        elif expected_mod_revision is not None:
            request.expected_mod_revision = expected_mod_revision
        reply = self._call("Put", request)
        previous = types.key_value_from_proto(reply.previous) if reply.had_previous else None
        return types.PutResult(revision=reply.revision, previous=previous)

    def get(self, key):
        """The :class:`KeyValue` of ``key``, or None when it does not exist."""
        try:
            reply = self._call("Get", kv_pb2.GetRequest(namespace=self.namespace, key=_bytes(key)))
        except errors.NotFoundError:
            return None
        return types.key_value_from_proto(reply.kv)

    def range(self, prefix=b"", *, limit=0, start_after=b"", keys_only=False):
        """One page of the keys under ``prefix`` in key order (``limit`` 0: the server's
        page size). See :meth:`items` for all of them."""
        reply = self._call("Range", kv_pb2.RangeRequest(
            namespace=self.namespace, prefix=_bytes(prefix), limit=limit,
            start_after=_bytes(start_after), keys_only=keys_only))
        return types.from_proto(types.RangeResult, reply)

    def items(self, prefix=b"", *, page_size=0, keys_only=False):
        """Every :class:`KeyValue` under ``prefix``, page by page."""
        start_after = b""
        while True:
            page = self.range(prefix, limit=page_size, start_after=start_after,
                              keys_only=keys_only)
            yield from page.kvs
            if not page.more:
                return
            start_after = page.next_start_after

    def delete(self, key, *, prefix=False):
        """Deletes ``key`` (with ``prefix``: every key starting with it); returns how many."""
        reply = self._call("Delete", kv_pb2.DeleteRequest(namespace=self.namespace,
                                                          key=_bytes(key), prefix=prefix))
        return reply.deleted

    def compare_and_set(self, key, expected, desired):
        """TCPStore's compare_set: sets ``desired`` if the value equals ``expected`` (a
        missing key matches ``b""``). Returns a :class:`CompareAndSetResult`."""
        reply = self._call("CompareAndSet", kv_pb2.CompareAndSetRequest(
            namespace=self.namespace, key=_bytes(key), expected=_bytes(expected),
            desired=_bytes(desired)))
        return types.from_proto(types.CompareAndSetResult, reply)

    def add(self, key, delta=1):
        """TCPStore's add: the key holds a decimal integer (missing: 0); adds ``delta``
        atomically and returns the new value."""
        reply = self._call("Add", kv_pb2.AddRequest(namespace=self.namespace, key=_bytes(key),
                                                    delta=delta))
        return reply.value

    def wait(self, keys, timeout=None):
        """Returns once every key of ``keys`` exists (the store's revision then);
        DeadlineExceededError after ``timeout`` seconds (None: the server's default)."""
        if isinstance(keys, (str, bytes)):
            keys = [keys]
        timeout_ms = 0 if timeout is None else max(1, int(timeout * 1000))
        call_timeout = self._connection.timeout + (timeout if timeout is not None else 600.0)
        reply = self._call("Wait", kv_pb2.WaitRequest(
            namespace=self.namespace, keys=[_bytes(k) for k in keys], timeout_ms=timeout_ms),
            timeout=call_timeout)
        return reply.revision

    def watch(self, prefix=b"", start_revision=0, reconnect_delay=0.2, max_reconnect_delay=5.0):
        """Iterates over :class:`KvEvent` under ``prefix`` from ``start_revision`` (0: only
        changes after now); resumes after the last revision seen when the connection drops.
        Returns a :class:`KvWatch` (``close()`` ends it)."""
        return KvWatch(self._connection, self.namespace, _bytes(prefix), start_revision,
                       reconnect_delay=reconnect_delay, max_reconnect_delay=max_reconnect_delay)

    def grant_lease(self, ttl):
        """A new lease of ``ttl`` seconds owned by this namespace; keys put with it are
        deleted when it expires or is revoked. Returns a :class:`Lease`."""
        reply = self._call("LeaseGrant", kv_pb2.LeaseGrantRequest(
            ttl_ms=max(1, int(ttl * 1000)), namespace=self.namespace))
        return types.Lease(lease=reply.lease, ttl_ms=reply.ttl_ms)

    def keep_alive(self, lease):
        """Renews ``lease`` (a :class:`Lease` or its id) for its TTL; NotFoundError once
        it expired."""
        reply = self._call("LeaseKeepAlive", kv_pb2.LeaseKeepAliveRequest(lease=_lease_id(lease)))
        return types.Lease(lease=reply.lease, ttl_ms=reply.ttl_ms)

    def revoke_lease(self, lease):
        """Revokes ``lease``; returns how many keys it deleted."""
        reply = self._call("LeaseRevoke", kv_pb2.LeaseRevokeRequest(lease=_lease_id(lease)))
        return reply.deleted

    def status(self):
        """The store's revision and counters (:class:`KvStatus`)."""
        return types.from_proto(types.KvStatus, self._call("Status", kv_pb2.StatusRequest()))


def _lease_id(lease):
    return lease.lease if isinstance(lease, types.Lease) else int(lease)
