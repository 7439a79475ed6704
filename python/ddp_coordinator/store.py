"""A c10d Store over the coordinator's key-value service: ``init_process_group`` without a
TCPStore hosted by rank 0.

    import torch.distributed as dist
    from ddp_coordinator.store import CoordinatorStore

    store = CoordinatorStore()          # job, generation, coordinator from ddp-client's env
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)

or, with the ``ddp://`` scheme this module registers when imported::

    import ddp_coordinator.store        # registers ddp://
    dist.init_process_group("gloo", init_method="ddp://")      # RANK, WORLD_SIZE from env
    dist.init_process_group("gloo", init_method="ddp://c1:29400,c2:29400?job=j&generation=3",
                            rank=rank, world_size=world_size)

Keys live in the job's namespace under ``<prefix>/r<run id>/g<generation>/`` (prefix
``c10d``; the run id tells this run of the job id from earlier ones, whose generations
counted from 1 too), so a generation never sees a key of an earlier one or of an earlier run;
``delete_previous_generations()`` removes those (the ``ddp://`` handler does it from rank 0). Every write is durable on the
coordinator before it returns, and the store keeps working across a coordinator restart or
failover (calls that find no coordinator are retried round the endpoint list). ``wait`` and
a ``get`` of a missing key block in the coordinator's KV Wait call, never by polling.

Requires PyTorch (``torch.distributed``); the rest of the package does not.
"""
import datetime
import importlib
import os
import re
import time
import urllib.parse

import grpc
import torch.distributed as dist

from ddp_coordinator import errors
from ddp_coordinator.client import Client

SCHEME = "ddp"
DEFAULT_PREFIX = "c10d"
DEFAULT_TIMEOUT = datetime.timedelta(seconds=300)  # TCPStore's
# One KV Wait call blocks at most this long (the coordinator accepts up to 24 h); a wait
# without a timeout (c10d's kNoTimeout, 0) calls again until the keys exist.
_WAIT_CHUNK_S = 3600.0
# Pause before waiting again after the coordinator cancelled a Wait (it was shutting down).
_WAIT_AGAIN_AFTER_CANCEL_S = 0.2
# The coordinator's cap on the keys of one KV Wait call (KvLimits::max_keys_per_request).
_WAIT_KEYS_PER_CALL = 1024
# What the coordinator's Add accepts as a counter (a decimal int64).
_DECIMAL = re.compile(rb"-?[0-9]{1,19}")
# Range page for num_keys (the coordinator's cap).
_PAGE = 10000


class StoreTimeoutError(errors.DeadlineExceededError, RuntimeError):
    """A ``wait`` or ``get`` whose keys did not all appear within the store's timeout.

    A RuntimeError, as TCPStore's timeouts are, and a :class:`DeadlineExceededError`."""


def _to_bytes(value, what):
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (list, tuple)):
        # torch 1.13's trampoline hands compare_set's values over as lists of byte values.
        return bytes(value)
    raise TypeError(f"{what}: expected str or bytes, got {type(value).__name__}")


def _non_negative(value, name):
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} {value!r} is not an integer") from None
    if number < 0:
        raise ValueError(f"{name} {number} is negative")
    return number


_DIGITS = re.compile(rb"[0-9]{1,19}")


def _run_and_generation(rest):
    """``b"<run>/g<generation>/..."`` -> (run, generation), each as its digits (kept as
    written, so that a key spelled ``r007`` is deleted by its own prefix); None for a part
    that is not of that layout (generation None also when the run's part is fine)."""
    run, slash, after = rest.partition(b"/")
    if not slash or not _DIGITS.fullmatch(run):
        return None, None
    generation, slash, _ = after[1:].partition(b"/")
    if not after.startswith(b"g") or not slash or not _DIGITS.fullmatch(generation):
        return run, None
    return run, generation


def _seconds(timeout):
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


class CoordinatorStore(dist.Store):
    """A ``torch.distributed.Store`` whose keys live in the coordinator's KV store.

    Args:
        coordinator: ``"HOST:PORT[,HOST:PORT...]"`` (all coordinators of an HA deployment;
            calls follow the leader). Default ``$DDP_COORDINATOR``, else localhost:29400.
        job: the KV namespace (a job's token may use only its job's). Default ``$DDP_JOB``
            (ddp-client), else ``$TORCHELASTIC_RUN_ID``.
        generation: scopes the keys (an int >= 0). Default ``$DDP_GENERATION``, which
            ddp-client gives each worker; outside ddp-client it must be given, because keys
            left by an earlier attempt would otherwise be read as this one's.
        run_id: scopes the keys to one run of the job id (an int >= 0): a finished job id
            starts its next run at generation 1 again, in the same namespace. Default: the
            current run's creation time in ms (``Job.created_unix_ms``, one GetJob call),
            which no later run shares, not even after DeleteJob; 0 when no job of that id
            exists (a namespace used without a job).
        prefix: the keys' common prefix inside the namespace (default ``c10d``).
        timeout: how long ``get`` and ``wait`` wait for missing keys (a ``timedelta`` or
            seconds; default 300 s, TCPStore's); ``set_timeout`` changes it.
        token, tls_ca, tls_cert, tls_key: as :class:`ddp_coordinator.Client` (defaults
            ``$DDP_TOKEN``, ``$DDP_TLS_*``).
        retry_rounds: how often a call that finds no coordinator goes round the endpoint
            list (with growing pauses, about 11 s in all for 10) before it raises
            :class:`UnavailableError`: long enough to ride out a coordinator restart.
        client: a :class:`ddp_coordinator.Client` to use instead of making one (the
            connection arguments are then ignored).
        environ: where the defaults are read (default ``os.environ``).

    Raises ValueError for a missing or malformed job or generation. The store's calls
    raise :class:`StoreTimeoutError` on a timeout and :class:`CoordinatorError`
    subclasses for what the coordinator refused (e.g. ``InvalidArgumentError`` for an
    ``add`` to a key holding no integer). Thread-safe.

    Keep a reference to the store while a process group uses it: c10d holds only its C++
    part, and once the Python object is collected its methods are gone (torch raises
    "Tried to call pure virtual function"). The ``ddp://`` handler keeps its stores alive.
    """

    def __init__(self, coordinator=None, *, job=None, generation=None, run_id=None,
                 prefix=DEFAULT_PREFIX, timeout=DEFAULT_TIMEOUT, token=None, tls_ca=None,
                 tls_cert=None, tls_key=None, retry_rounds=10, client=None, environ=None):
        super().__init__()
        env = os.environ if environ is None else environ
        self.job = job or env.get("DDP_JOB") or env.get("TORCHELASTIC_RUN_ID") or ""
        if not self.job:
            raise ValueError("CoordinatorStore needs a job (the KV namespace): pass job= or "
                             "run under ddp-client, which sets DDP_JOB")
        if generation is None:
            if not env.get("DDP_GENERATION"):
                raise ValueError("CoordinatorStore needs a generation: pass generation= or "
                                 "run under ddp-client, which sets DDP_GENERATION")
            generation = env["DDP_GENERATION"]
        self.generation = _non_negative(generation, "generation")
        if not prefix or "/" in prefix:
            raise ValueError(f"prefix {prefix!r}: expected a non-empty name without '/'")
        self.prefix = prefix
        self._owns_client = client is None
        if client is None:  # the connection's defaults from `environ`, as everything else
            client = Client(coordinator or env.get("DDP_COORDINATOR") or None,
                            token=env.get("DDP_TOKEN", "") if token is None else token,
                            tls_ca=tls_ca or env.get("DDP_TLS_CA"),
                            tls_cert=tls_cert or env.get("DDP_TLS_CERT"),
                            tls_key=tls_key or env.get("DDP_TLS_KEY"),
                            retry_rounds=retry_rounds)
        self._client = client
        self._kv = client.kv(self.job)
        if run_id is None:
            run_id = self._current_run_id()
        self.run_id = _non_negative(run_id, "run_id")
        self._runs = f"{prefix}/r".encode()
        self._run_scope = f"{prefix}/r{self.run_id}/".encode()
        self._scope = self._run_scope + f"g{self.generation}/".encode()
        self.set_timeout(timeout if isinstance(timeout, datetime.timedelta)
                         else datetime.timedelta(seconds=float(timeout)))

    def __repr__(self):
        return (f"CoordinatorStore(job={self.job!r}, run_id={self.run_id}, "
                f"generation={self.generation}, prefix={self.prefix!r}, "
                f"coordinator={','.join(self._client.endpoints)!r})")

    def _current_run_id(self):
        try:
            return self._client.jobs.get(self.job).created_unix_ms
        except errors.NotFoundError:
            return 0

    @property
    def key_prefix(self):
        """The bytes every key of this store starts with in the job's namespace."""
        return self._scope

    def _key(self, key):
        return self._scope + _to_bytes(key, "key")

    # -- torch.distributed.Store -------------------------------------------------------

    def set(self, key, value):
        """Sets ``key`` to ``value`` (str or bytes), durably."""
        self._kv.put(self._key(key), _to_bytes(value, "value"))

    def get(self, key):
        """The value of ``key`` as bytes; waits up to the store's timeout for it to be set
        (StoreTimeoutError after)."""
        full = self._key(key)
        found = self._kv.get(full)
        if found is not None:
            return found.value
        deadline = self._deadline(None)
        while True:  # a delete between the wait and the read starts the wait again
            self._wait_keys([full], deadline, [key])
            found = self._kv.get(full)
            if found is not None:
                return found.value

    def add(self, key, amount):
        """Adds ``amount`` to the integer in ``key`` (a missing key counts as 0) atomically;
        returns the new value."""
        full, amount = self._key(key), int(amount)
        if amount == 0:
            # c10d reads counters with add(key, 0) (its store-based barrier polls so every
            # 10 ms): answered by a read, not a durable write, when the key holds an integer.
            found = self._kv.get(full)
            if found is not None and _DECIMAL.fullmatch(found.value):
                return int(found.value)
            # Missing (Add creates it, as TCPStore does) or not an integer (Add says so).
        return self._kv.add(full, amount)

    def compare_set(self, key, expected_value, desired_value):
        """Sets ``desired_value`` if ``key`` holds ``expected_value``, or if ``key`` is
        missing and ``expected_value`` is empty. Returns the value after the call, as
        TCPStore and HashStore do: for a missing key and a non-empty ``expected_value``,
        ``expected_value`` itself."""
        full = self._key(key)
        expected = _to_bytes(expected_value, "expected_value")
        result = self._kv.compare_and_set(full, expected, _to_bytes(desired_value,
                                                                    "desired_value"))
        if not result.swapped and result.value == b"" and expected:
            if self._kv.get(full) is None:
                return expected
        return result.value

    def wait(self, keys, timeout=None):
        """Returns once every key of ``keys`` is set; StoreTimeoutError after ``timeout``
        (a timedelta or seconds; default the store's timeout; 0 waits without end)."""
        if isinstance(keys, (str, bytes)):
            keys = [keys]
        self._wait_keys([self._key(k) for k in keys], self._deadline(timeout), keys)

    def check(self, keys):
        """Whether every key of ``keys`` is set now (no waiting)."""
        if isinstance(keys, (str, bytes)):
            keys = [keys]
        return all(self._kv.get(self._key(k)) is not None for k in keys)

    def delete_key(self, key):
        """Deletes ``key``; True if it existed."""
        return self._kv.delete(self._key(key)) > 0

    def num_keys(self):
        """How many keys this store (this job and generation) holds."""
        count = 0
        start_after = b""
        while True:
            page = self._kv.range(self._scope, limit=_PAGE, start_after=start_after,
                                  keys_only=True)
            count += len(page.kvs)
            if not page.more:
                return count
            start_after = page.next_start_after

    # c10d's C++ side (PrefixStore, ProcessGroupGloo) reaches a Python store through its
    # pybind11 trampoline, which in torch 1.13 looks these two up by their C++ names.
    def deleteKey(self, key):  # noqa: N802 (the C++ name)
        return self.delete_key(key)

    def getNumKeys(self):  # noqa: N802 (the C++ name)
        return self.num_keys()

    # -- beyond c10d ---------------------------------------------------------------------

    def delete_previous_generations(self):
        """Deletes the keys of every earlier generation of this run and of every other run
        of the job id (under the same prefix); returns how many. Keys of this and later
        generations of this run stay."""
        deleted = 0
        start_after = b""
        while True:
            page = self._kv.range(self._runs, limit=1, start_after=start_after,
                                  keys_only=True)
            if not page.kvs:
                return deleted
            key = page.kvs[0].key
            run, generation = _run_and_generation(key[len(self._runs):])
            if run is None:
                start_after = key  # not a key of this layout: step over it
            elif self._runs + run + b"/" != self._run_scope:
                # Another run of the job id: only one runs at a time, and it is this one.
                deleted += self._kv.delete(self._runs + run + b"/", prefix=True)
            elif generation is None:
                start_after = key
            elif int(generation) < self.generation:
                deleted += self._kv.delete(self._run_scope + b"g" + generation + b"/",
                                           prefix=True)
            else:
                # Past every key of that generation: ".../gN/..." sorts below ".../gN0"
                # ('/' < '0'), and every key of generation N0.. above it.
                start_after = self._run_scope + b"g" + generation + b"0"

    def close(self):
        """Closes the connection (when the store made it)."""
        if self._owns_client:
            self._client.close()

    # -- waiting -------------------------------------------------------------------------

    def _deadline(self, timeout):
        seconds = _seconds(self.timeout if timeout is None else timeout)
        return None if seconds <= 0 else time.monotonic() + seconds

    def _wait_keys(self, full_keys, deadline, shown_keys):
        # The coordinator takes at most _WAIT_KEYS_PER_CALL keys per Wait; a longer list
        # waits for one slice after the other, under the same deadline.
        for start in range(0, len(full_keys), _WAIT_KEYS_PER_CALL):
            self._wait_slice(full_keys[start:start + _WAIT_KEYS_PER_CALL], deadline,
                             shown_keys)

    def _wait_slice(self, full_keys, deadline, shown_keys):
        while True:
            if deadline is None:
                chunk = _WAIT_CHUNK_S
            else:
                chunk = deadline - time.monotonic()
                if chunk <= 0:
                    self._timed_out(shown_keys)
            try:
                self._kv.wait(full_keys, timeout=min(chunk, _WAIT_CHUNK_S))
                return
            except errors.DeadlineExceededError:
                if deadline is not None and time.monotonic() >= deadline:
                    self._timed_out(shown_keys)
            except errors.CancelledError:
                # This store never cancels its calls: a coordinator that shuts down ends
                # the Waits it holds with CANCELLED (not the UNAVAILABLE kv.proto names).
                # Wait again; the next call finds the restarted coordinator or a new leader.
                time.sleep(_WAIT_AGAIN_AFTER_CANCEL_S)

    def _timed_out(self, keys):
        shown = ", ".join(repr(k) for k in list(keys)[:8])
        more = f" and {len(keys) - 8} more" if len(keys) > 8 else ""
        raise StoreTimeoutError(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            f"wait timed out after {_seconds(self.timeout):g} s for key(s) {shown}{more} "
            f"of job {self.job!r} generation {self.generation}: a rank has not reached "
            f"this point (is it running, and in the same generation?)")


# -- the ddp:// init_method ---------------------------------------------------------------

def _query_value(query, name, env, env_name):
    values = query.get(name)
    if values:
        return values[-1]
    return env.get(env_name) if env_name else None


def _int_parameter(value, name, url):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{SCHEME}:// rendezvous {url!r}: {name}={value!r} is not an "
                         f"integer (pass it in the URL or init_process_group, or set the "
                         f"environment variable)") from None


def store_from_url(url, timeout=DEFAULT_TIMEOUT, environ=None):
    """``(store, rank, world_size)`` for ``ddp://[HOST:PORT[,HOST:PORT...]][/][?query]``.

    The host list defaults to ``$DDP_COORDINATOR``. Query parameters (each defaults to the
    environment): ``job`` (``DDP_JOB``), ``generation`` (``DDP_GENERATION``), ``rank``
    (``RANK``), ``world_size`` (``WORLD_SIZE``), ``prefix`` (``c10d``), ``run_id`` (the
    job's current run, looked up). Rank 0 deletes the
    keys of earlier generations.
    """
    env = os.environ if environ is None else environ
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme != SCHEME:
        raise ValueError(f"{url!r}: expected a {SCHEME}:// URL")
    query = urllib.parse.parse_qs(parsed.query)
    rank = _int_parameter(_query_value(query, "rank", env, "RANK"), "rank", url)
    world_size = _int_parameter(_query_value(query, "world_size", env, "WORLD_SIZE"),
                                "world_size", url)
    if not 0 <= rank < world_size:
        raise ValueError(f"{SCHEME}:// rendezvous {url!r}: rank {rank} is not in "
                         f"0..world_size-1 ({world_size})")
    store = CoordinatorStore(parsed.netloc or None,
                             job=_query_value(query, "job", env, None),
                             generation=_query_value(query, "generation", env, None),
                             run_id=_query_value(query, "run_id", env, None),
                             prefix=_query_value(query, "prefix", env, None) or DEFAULT_PREFIX,
                             timeout=timeout, environ=env)
    if rank == 0:
        store.delete_previous_generations()
    return store, rank, world_size


# The stores the ddp:// handler made. c10d keeps only the C++ part of a Python store;
# were the Python object collected, its methods would be gone ("Tried to call pure virtual
# function"), so each one lives as long as the process.
_HANDLER_STORES = []


def _rendezvous_handler(url, timeout=DEFAULT_TIMEOUT, **kwargs):
    store, rank, world_size = store_from_url(url, timeout=timeout)
    _HANDLER_STORES.append(store)
    yield store, rank, world_size
    raise RuntimeError(f"{SCHEME}:// does not re-rendezvous: ddp-client restarts the workers "
                       f"of a new generation instead")


def register_rendezvous_handler():
    """Registers ``ddp://`` with ``torch.distributed`` (done when this module is imported;
    calling it again does nothing)."""
    # The module, not torch.distributed.rendezvous() the function of the same name.
    handlers = importlib.import_module("torch.distributed.rendezvous")
    if SCHEME not in handlers._rendezvous_handlers:
        handlers.register_rendezvous_handler(SCHEME, _rendezvous_handler)


register_rendezvous_handler()
