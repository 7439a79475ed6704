"""In-process restart: a training loop that survives the failure of another rank.

Under ``ddp-client --in-process-restart``, a worker that runs its loop through :func:`run`
keeps its process when another rank fails: it leaves the broken process group, waits for
the next generation's assignment from its agent, builds a new process group on that
generation's store, and calls the loop again with the state it has in memory. Only the
failed ranks start again (warm with ``--prewarm``). Without the flag (or under torchrun),
:func:`run` initializes the process group once and calls the loop once: today's behaviour.

    import ddp_coordinator.recovery as recovery

    def train(state, generation):
        model = DDP(state["model"])            # wrap inside the loop: a new group each time
        while state["step"] < steps:
            ...                                 # forward, backward, optimizer step
            state["step"] += 1

    recovery.run(train, {"model": model, "optimizer": optimizer, "step": 0})

The contract (docs/worker-contract.md, "In-process restart"):

- ``train_loop(state, generation)`` may be called several times in one process, once per
  generation this process takes part in; ``generation`` is a :class:`Generation`. A step the
  failure interrupted is not applied on this rank (its collective raised); it must leave
  ``state`` as it was before the step (update the step counter after the optimizer step).
- With ``sync_state=True`` (the default), at the start of every generation that has both
  survivors and new processes, the state of the lowest-ranked survivor is sent over the new
  process group to the new ranks alone (``state_dict()``/``load_state_dict()`` of the state,
  or of each value of a dict state; other values are copied); the other survivors keep their
  own. A generation of new processes only (the first, or after a full restart) sends nothing:
  load the checkpoint then.
- The agent tells survivors to leave at once (``DDP_RECOVERY_DIR``); a survivor blocked in a
  collective is unblocked by shutting down the sockets the process group opened (gloo), or
  by aborting the communicator (NCCL). A loop that computes for long without collectives may
  poll ``generation.abandoned``. A survivor that has not left within the agent's
  ``--in-process-restart-timeout`` is stopped and started again.
"""
import ctypes
import json
import os
import pickle
import platform
import signal
import socket
import stat
import sys
import threading
import time

# How long a loop that raised a RuntimeError (a collective that failed) waits for its agent
# to say that a peer failed, before the error counts as this rank's own failure.
PEER_FAILURE_WAIT_S = 10.0
_MAX_LINE_BYTES = 1 << 20
# DDP_RECOVERY_TRACE=1: one stderr line per step of a recovery, with its wall-clock time
# ("ddp_coordinator.recovery: trace T rank R STEP"), for tools/bench_launch's breakdown. Read
# at each step, not at import: a --prewarm zygote imports this module with the node's
# environment, before the worker's own.


def _trace(step):
    if os.environ.get("DDP_RECOVERY_TRACE", "") not in ("", "0"):
        print(f"ddp_coordinator.recovery: trace {time.time():.6f} rank "
              f"{os.environ.get('RANK', '?')} {step}", file=sys.stderr, flush=True)


class Generation:
    """What the training loop learns about the generation it runs in."""

    def __init__(self, environ, survivor, replaced_ranks, abandoned_event):
        self.generation = int(environ.get("DDP_GENERATION", "0") or 0)
        self.rank = int(environ.get("RANK", "0"))
        self.world_size = int(environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(environ.get("LOCAL_RANK", "0"))
        self.restart_count = int(environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)
        # True: this process ran an earlier generation and kept its memory.
        self.survivor = survivor
        # Ranks of this generation that are new processes (empty in a generation of
        # survivors only; every rank in one of new processes only).
        self.replaced_ranks = list(replaced_ranks)
        # The generation's NCCL unique id from the coordinator (bytes), or None.
        nccl_id = environ.get("DDP_NCCL_UNIQUE_ID")
        self.nccl_unique_id = bytes.fromhex(nccl_id) if nccl_id else None
        self._abandoned = abandoned_event

    @property
    def abandoned(self):
        """True once the agent said a peer failed: return or raise, the next generation waits."""
        return self._abandoned.is_set()

    def __repr__(self):
        return (f"Generation(generation={self.generation}, rank={self.rank}, "
                f"world_size={self.world_size}, survivor={self.survivor}, "
                f"replaced_ranks={self.replaced_ranks})")


def _socket_fds():
    """The descriptors of this process that are sockets."""
    fds = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if stat.S_ISSOCK(os.stat(f"/proc/self/fd/{name}").st_mode):
                fds.add(int(name))
        except OSError:
            pass
    return fds


def _shut_down(fds):
    """Shuts down the connected TCP sockets among ``fds`` without closing them (their owners
    do): every read or write pending on them fails at once. Listening sockets are left alone
    (torch's TCPStore server treats an event on its listener as fatal)."""
    for fd in fds:
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            continue
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and \
                    not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            sock.detach()


class _Channel:
    """The worker's side of client/recovery_channel.h: DIR/control (FIFO, the agent's
    orders, read by a daemon thread) and DIR/state (this worker's state line)."""

    def __init__(self, directory):
        self._dir = directory
        # Read-write: the open never blocks, and the FIFO never reads EOF.
        self._fd = os.open(os.path.join(directory, "control"), os.O_RDWR | os.O_CLOEXEC)
        self._lock = threading.Lock()
        self._generation = None      # the one this process runs now (None: parked)
        self._group_sockets = None   # () -> socket fds of its process group
        self._abort = None           # () -> None: aborts an NCCL communicator
        self.abandoned = threading.Event()
        self._joins = []
        self._joined = threading.Condition(self._lock)
        thread = threading.Thread(target=self._read, name="ddp-recovery", daemon=True)
        thread.start()

    def report(self, state, generation):
        path = os.path.join(self._dir, "state")
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{state} {generation} {os.getpid()}\n")
        os.rename(tmp, path)

    def arm(self, generation, group_sockets, abort=None):
        with self._lock:
            self._generation = generation
            self._group_sockets = group_sockets
            self._abort = abort
            self.abandoned.clear()

    def disarm(self):
        with self._lock:
            self._generation = None

    def wait_for_join(self, after):
        """Blocks until the agent names a generation newer than ``after``; returns
        (generation, environment variables)."""
        with self._joined:
            while True:
                for generation, env in self._joins:
                    if generation > after:
                        self._joins.clear()
                        return generation, env
                self._joins.clear()
                self._joined.wait()

    def _read(self):
        pending = b""
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except InterruptedError:
                continue
            except OSError:
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                self._handle(line)
            if len(pending) > _MAX_LINE_BYTES:
                pending = b""  # never from the agent: drop rather than grow

    def _handle(self, line):
        try:
            message = json.loads(line)
            op, generation = message["op"], int(message["generation"])
        except (ValueError, KeyError, TypeError):
            print(f"ddp_coordinator.recovery: ignored a malformed order {line[:200]!r}",
                  file=sys.stderr)
            return
        if op == "abandon":
            _trace(f"abandon {generation} received")
            with self._lock:
                if self._generation != generation:
                    return
                self.abandoned.set()
                sockets, abort = self._group_sockets, self._abort
            if abort is not None:
                try:
                    abort()
                except Exception as error:  # the deadline still holds
                    print(f"ddp_coordinator.recovery: abort failed: {error}", file=sys.stderr)
            _shut_down(sockets())
            _trace(f"abandon {generation} sockets shut down")
        elif op == "join":
            env = message.get("env")
            if not isinstance(env, dict):
                return
            _trace(f"join {generation} received")
            with self._joined:
                self._joins.append((generation, {str(k): str(v) for k, v in env.items()}))
                self._joined.notify_all()


def _await_store(timeout_s, abandoned=None, poll_s=0.002):
    """Ranks other than 0: waits until the generation's store (rank 0's TCPStore on
    MASTER_ADDR:MASTER_PORT) accepts connections. torch's TCPStore client, refused, sleeps a
    whole second before it tries again; survivors that join together with rank 0 would hit
    that in about half the generations. Returns False past ``timeout_s`` (init then waits
    and reports as it would have). Raises RuntimeError once ``abandoned`` (an Event) is set:
    a peer failed before the group formed, the generation is over."""
    if os.environ.get("RANK", "0") == "0":
        return True
    address = (os.environ.get("MASTER_ADDR", ""), int(os.environ.get("MASTER_PORT", "0") or 0))
    if not address[0] or not address[1]:
        return True
    deadline = time.monotonic() + timeout_s
    while True:
        if abandoned is not None and abandoned.is_set():
            raise RuntimeError(f"abandoned while waiting for the store at "
                               f"{address[0]}:{address[1]}")
        try:
            socket.create_connection(address, timeout=max(0.05, poll_s)).close()
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)


def _generation_store(dist, timeout, abandoned):
    """The generation's store as ``init_process_group("env://")`` makes it (rank 0's TCPStore
    on MASTER_ADDR:MASTER_PORT, keys under "default_pg"), without its start-up wait: the
    env:// store's server polls every 10 ms until every rank has connected, which the process
    group's own rendezvous does anyway. Ranks other than 0 connect once the server listens
    (_await_store). None when the environment or this torch lacks what it needs (init then
    goes through env://)."""
    address, port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    if not address or not port.isdigit() or "RANK" not in os.environ or \
            "WORLD_SIZE" not in os.environ:
        return None
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if rank != 0:
        _await_store(timeout.total_seconds(), abandoned)
    try:
        store = dist.TCPStore(address, int(port), world_size, rank == 0, timeout,
                              wait_for_workers=False)
    except TypeError:  # a torch without wait_for_workers
        return None
    _trace("store connected")
    return dist.PrefixStore("default_pg", store)


class _event_driven_barrier:
    """Within: torch 1.13's barrier at the end of ``init_process_group`` waits on the store
    for its last rank instead of polling every 10 ms (what torch 2.x does itself). Left
    alone on any torch whose barrier has another signature."""

    def __init__(self, dist):
        self._c10d = dist.distributed_c10d
        self._original = getattr(self._c10d, "_store_based_barrier", None)

    def __enter__(self):
        import inspect
        original = self._original
        if original is None or \
                list(inspect.signature(original).parameters) != ["rank", "store", "timeout"]:
            self._original = None
            return self
        c10d = self._c10d

        def barrier(rank, store, timeout):
            key = f"{c10d.STORE_BASED_BARRIER_PREFIX}:{c10d._group_count}"
            if store.add(key, 1) >= c10d.get_world_size():
                store.set(f"{key}:last", "1")
            store.wait([f"{key}:last"], timeout)

        c10d._store_based_barrier = barrier
        return self

    def __exit__(self, *exc):
        if self._original is not None:
            self._c10d._store_based_barrier = self._original
        return False


# How often _gloo_loop_ticks wakes gloo's event loop while a process group forms, and for
# how long at most (a group that waits that long for a late rank goes on with gloo's own
# 10 ms ticks).
GLOO_LOOP_TICK_S = 0.0005
GLOO_LOOP_TICKS_FOR_S = 10.0
# The system calls gloo's event loop waits in (epoll_wait, epoll_pwait, epoll_pwait2), by
# machine: how _gloo_loop_ticks tells that thread from the others started beside it.
_EPOLL_WAIT_CALLS = {"x86_64": {232, 281, 441}, "aarch64": {22, 441}}
_CLOCK_MONOTONIC = 1
_SIGEV_THREAD_ID = 4


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class _Sigevent(ctypes.Structure):  # Linux's struct sigevent, SIGEV_THREAD_ID's part
    _fields_ = [("sigev_value", ctypes.c_void_p), ("sigev_signo", ctypes.c_int),
                ("sigev_notify", ctypes.c_int), ("sigev_tid", ctypes.c_int),
                ("_pad", ctypes.c_int * 11)]


def _thread_ids():
    try:
        return {int(name) for name in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _waits_in(tid, calls):
    """True when thread ``tid`` of this process is blocked in one of the system ``calls``."""
    try:
        with open(f"/proc/self/task/{tid}/syscall", "rb") as f:
            number = f.read(16).split(b" ", 1)[0]
    except OSError:
        return False
    return number.isdigit() and int(number) in calls


def _ignore_signal(signum, frame):
    pass


class _gloo_loop_ticks:
    """Within: gloo's event loop, once it starts, is woken every GLOO_LOOP_TICK_S by a
    kernel timer (SIGURG, handled by a no-op). gloo (torch 1.13) makes each connection of a
    new process group only after its event loop has ticked once (``unregisterDescriptor``
    waits for it), and the loop ticks on an event or after its 10 ms ``epoll_wait``
    timeout: up to 10 ms per pair, one pair after another (7 at 8 ranks). A signal ends the
    ``epoll_wait`` at once (EINTR, which the loop takes as a tick). Measured on this 2-core
    machine: an 8-process group 80-140 ms -> 24-33 ms (docs/benchmarks.md).

    The loop's thread is the new thread that waits in epoll_wait (a watcher thread looks
    for it every GLOO_LOOP_TICK_S); the timer is the kernel's (SIGEV_THREAD_ID), so the
    ticks cost no Python; they stop when the block ends or after GLOO_LOOP_TICKS_FOR_S. Any
    other thread started meanwhile that waits in epoll_wait gets them too: an EINTR, which
    epoll loops retry. Left alone (a plain ``with``) for other backends, off the main
    thread, where SIGURG already has a handler, or on a machine not in _EPOLL_WAIT_CALLS."""

    def __init__(self, backend, interval_s=GLOO_LOOP_TICK_S):
        self._calls = _EPOLL_WAIT_CALLS.get(platform.machine()) \
            if backend == "gloo" and interval_s > 0 else None
        self._interval_s = interval_s
        self._previous = None
        self._stop = threading.Event()
        self._watcher = None
        self._timers = []
        self._delete = None  # timer_delete, once __enter__ found it

    def __enter__(self):
        if self._calls is None or threading.current_thread() is not threading.main_thread() \
                or signal.getsignal(signal.SIGURG) not in (signal.SIG_DFL, None):
            return self
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            create, arm, self._delete = libc.timer_create, libc.timer_settime, \
                libc.timer_delete
        except (OSError, AttributeError):
            return self
        self._previous = signal.signal(signal.SIGURG, _ignore_signal)
        before = _thread_ids()
        nanoseconds = int(self._interval_s * 1e9)
        period = _Timespec(nanoseconds // 1_000_000_000, nanoseconds % 1_000_000_000)

        def watch():
            seen = {threading.get_native_id()}
            deadline = time.monotonic() + GLOO_LOOP_TICKS_FOR_S
            while not self._stop.wait(self._interval_s if not self._timers else 0.005):
                if time.monotonic() > deadline:
                    for timer in self._timers:
                        arm(timer, 0, ctypes.byref(_Itimerspec()), None)  # disarmed
                    return
                for tid in _thread_ids() - before - seen:
                    if not _waits_in(tid, self._calls):
                        continue  # not (yet) seen in epoll_wait: looked at again
                    seen.add(tid)
                    event = _Sigevent(None, int(signal.SIGURG), _SIGEV_THREAD_ID, tid)
                    timer = ctypes.c_void_p()
                    if create(_CLOCK_MONOTONIC, ctypes.byref(event), ctypes.byref(timer)):
                        continue
                    self._timers.append(timer)
                    arm(timer, 0, ctypes.byref(_Itimerspec(period, period)), None)

        self._watcher = threading.Thread(target=watch, name="gloo-loop-ticks", daemon=True)
        self._watcher.start()
        return self

    def __exit__(self, *exc):
        if self._watcher is not None:
            self._stop.set()
            self._watcher.join()
            for timer in self._timers:
                self._delete(timer)
            signal.signal(signal.SIGURG, self._previous)
        return False


def _default_state_dict(state):
    if hasattr(state, "state_dict") and hasattr(state, "load_state_dict"):
        return state.state_dict()
    if isinstance(state, dict):
        return {key: value.state_dict() if hasattr(value, "load_state_dict") else value
                for key, value in state.items()}
    raise TypeError("sync_state needs a state with state_dict()/load_state_dict() or a dict; "
                    f"got {type(state).__name__}: pass state_dict= and load_state_dict=")


def _default_load_state_dict(state, payload):
    if hasattr(state, "state_dict") and hasattr(state, "load_state_dict"):
        state.load_state_dict(payload)
        return
    for key, value in payload.items():
        if key in state and hasattr(state[key], "load_state_dict"):
            state[key].load_state_dict(value)
        else:
            state[key] = value


def _collective_device(dist, torch):
    """Where the group's tensors live: the current GPU under NCCL, else the CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _send_object(dist, torch, obj, ranks, device):
    """Pickles ``obj`` once and sends it to each of ``ranks`` (its size, then its bytes)."""
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8).to(device)
    size = torch.tensor([data.numel()], dtype=torch.int64, device=device)
    for rank in ranks:
        dist.send(size, rank)
        dist.send(data, rank)


def _recv_object(dist, torch, source, device):
    size = torch.zeros(1, dtype=torch.int64, device=device)
    dist.recv(size, source)
    data = torch.empty(int(size.item()), dtype=torch.uint8, device=device)
    dist.recv(data, source)
    return pickle.loads(data.cpu().numpy().tobytes())


class _SurvivorRoster:
    """Which ranks of a generation kept their process, through the generation's store: a
    survivor adds its bit to a counter (``store.add``, 60 ranks a key) before it joins the
    process group, and every rank reads the counters once the group is formed (each rank
    joins only after its announcement, and the group forms only once every rank joined).
    One store round trip per 60 ranks, where an all_gather over the new group made 8
    processes on 2 cores wait 5-20 ms for its ring."""

    BITS = 60
    # Beyond this, every rank reading every key of one store (world_size / 60 round trips
    # each, to rank 0's store) would cost more than the all_gather it replaces: a bound
    # chosen, not measured; larger groups go through the all_gather.
    MAX_RANKS = 8 * BITS

    def __init__(self, store, generation, world_size):
        self._store = store
        self._prefix = f"ddp_recovery/{generation}/survivors/"
        self._world_size = world_size

    def announce(self, rank):
        self._store.add(f"{self._prefix}{rank // self.BITS}", 1 << (rank % self.BITS))

    def read(self):
        ranks = []
        for chunk in range((self._world_size + self.BITS - 1) // self.BITS):
            mask = self._store.add(f"{self._prefix}{chunk}", 0)
            ranks.extend(chunk * self.BITS + bit for bit in range(self.BITS)
                         if mask >> bit & 1)
        return [r for r in ranks if r < self._world_size]


def _new_ranks(world_size, survivors):
    alive = set(survivors)
    return [r for r in range(world_size) if r not in alive]


def _sync_state(dist, torch, state, survivor, state_dict, load_state_dict, survivors=None):
    """When some ranks survived and some are new, the lowest-ranked survivor sends its
    state to the new ranks alone (the other survivors keep theirs and go on at once; no
    broadcast to every rank). ``survivors``: the ranks that kept their process, from the
    store (_SurvivorRoster); None: every rank tells the others (an all_gather). Returns the
    ranks that are new processes."""
    world = dist.get_world_size()
    device = _collective_device(dist, torch)
    if survivors is None:
        flags = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
        dist.all_gather(flags, torch.tensor([1 if survivor else 0], dtype=torch.int64,
                                            device=device))
        survivors = [r for r, f in enumerate(flags) if int(f.item()) == 1]
    replaced = _new_ranks(world, survivors)
    if survivors and replaced:
        source = min(survivors)
        rank = dist.get_rank()
        if rank == source:
            _send_object(dist, torch, state_dict(state), replaced, device)
        elif rank in replaced:
            load_state_dict(state, _recv_object(dist, torch, source, device))
    return replaced


def _abort_for(dist, backend):
    """NCCL: a function that aborts the default group's communicators, unblocking a rank
    stuck in a collective. UNTESTED here (no GPU on the build machines)."""
    if backend != "nccl":
        return None

    def abort():
        abort_group = getattr(dist.distributed_c10d, "_abort_process_group", None)
        if abort_group is not None:  # torch >= 2.6
            abort_group()
            return
        import torch
        group = dist.distributed_c10d._get_default_group()
        backend_of = getattr(group, "_get_backend", None)
        nccl = backend_of(torch.device("cuda")) if backend_of else group
        for name in ("abort", "_shutdown", "shutdown"):
            if hasattr(nccl, name):
                getattr(nccl, name)()
                return
        raise RuntimeError("this torch has no way to abort an NCCL communicator")
    return abort


def run(train_loop, state=None, *, backend="gloo", timeout=None, sync_state=True,
        state_dict=_default_state_dict, load_state_dict=_default_load_state_dict,
        peer_failure_wait_s=PEER_FAILURE_WAIT_S):
    """Runs ``train_loop(state, generation)`` under the process group of every generation
    this process takes part in (see the module's description); returns what the last call
    returned. ``backend``: "gloo" (tested) or "nccl" (written, untested here). ``timeout``:
    the process group's collective timeout (a ``datetime.timedelta``; torch's default when
    None). Raises what the loop raised when it was not a peer's failure."""
    import torch
    import torch.distributed as dist

    def init(abandoned=None, survivor=False):
        """The generation's process group; returns the ranks that kept their process (a
        survivor announces itself in the store before it joins the group, so the roster is
        complete once the group is); None when it went through env:// (no store here) or
        the group is larger than _SurvivorRoster.MAX_RANKS (the all_gather says it then)."""
        group_timeout = timeout if timeout is not None else \
            dist.distributed_c10d.default_pg_timeout
        store = None
        if abandoned is not None:
            store = _generation_store(dist, group_timeout, abandoned)
        with _gloo_loop_ticks(backend):
            if store is None:
                dist.init_process_group(backend=backend, init_method="env://",
                                        timeout=group_timeout)
                return None
            world_size = int(os.environ["WORLD_SIZE"])
            roster = _SurvivorRoster(store, int(os.environ["DDP_GENERATION"]), world_size) \
                if world_size <= _SurvivorRoster.MAX_RANKS else None
            if roster is not None and survivor:
                roster.announce(int(os.environ["RANK"]))
            with _event_driven_barrier(dist):
                dist.init_process_group(backend=backend, store=store, timeout=group_timeout,
                                        rank=int(os.environ["RANK"]), world_size=world_size)
        return roster.read() if roster is not None else None

    directory = os.environ.get("DDP_RECOVERY_DIR")
    if not directory:  # not under ddp-client --in-process-restart: one generation
        init()
        try:
            return train_loop(state, Generation(os.environ, False, [], threading.Event()))
        finally:
            dist.destroy_process_group()

    channel = _Channel(directory)
    survivor = False
    while True:
        generation = int(os.environ["DDP_GENERATION"])
        before = _socket_fds()
        initialized = []  # the group's sockets once init returned

        def group_sockets():
            return initialized[0] if initialized else _socket_fds() - before

        _trace(f"generation {generation} begins")
        channel.arm(generation, group_sockets, _abort_for(dist, backend))
        channel.report("running", generation)
        try:
            survivors = init(channel.abandoned, survivor)
            initialized.append(_socket_fds() - before)
            _trace(f"generation {generation} process group ready")
            if survivors is not None:  # the roster says who is new
                replaced = _new_ranks(dist.get_world_size(), survivors)
            else:
                replaced = list(range(dist.get_world_size())) if not survivor else []
            if sync_state:
                replaced = _sync_state(dist, torch, state, survivor, state_dict,
                                       load_state_dict, survivors)
                _trace(f"generation {generation} state synced")
            result = train_loop(state, Generation(os.environ, survivor, replaced,
                                                  channel.abandoned))
        except BaseException as error:
            if not channel.abandoned.is_set() and isinstance(error, RuntimeError):
                channel.abandoned.wait(peer_failure_wait_s)
            if not channel.abandoned.is_set():
                channel.disarm()
                raise
            print(f"ddp_coordinator.recovery: generation {generation} abandoned (a peer "
                  f"failed; here: {type(error).__name__}: {str(error)[:200]}); waiting for "
                  "the next", file=sys.stderr, flush=True)
        else:
            channel.disarm()
            if dist.is_initialized():
                dist.destroy_process_group()
            return result
        # A peer failed: leave the group, wait for the next generation.
        _trace(f"generation {generation} loop left")
        channel.disarm()
        _shut_down(group_sockets())
        # Parked once its sockets are shut down: nothing of this process reaches the old
        # group any more (the fence), and the loop has returned. Tearing the group down
        # (gloo's threads, rank 0's store) overlaps the coordinator's next round.
        channel.report("parked", generation)
        _trace(f"generation {generation} parked")
        if dist.is_initialized():
            dist.destroy_process_group()
        started = time.monotonic()
        _, env = channel.wait_for_join(generation)
        os.environ.update(env)
        # As the agent's sitecustomize.py: registered, then out of the environment.
        _register_stack_dump(os.environ.pop("DDP_STACK_DUMP_FILE", None))
        print(f"ddp_coordinator.recovery: joining generation {env.get('DDP_GENERATION')} as "
              f"rank {env.get('RANK')} after {time.monotonic() - started:.3f} s parked",
              file=sys.stderr, flush=True)
        survivor = True


def _register_stack_dump(path):
    """The agent's stack dumps (client/stack_dump.h) go to the new generation's file."""
    if not path:
        return
    try:
        import faulthandler
        import signal
        dump = open(path, "w")
        dump.write("ddp-stack-dump pid=%d signal=%d\n" % (os.getpid(), signal.SIGUSR2))
        dump.flush()
        faulthandler.register(signal.SIGUSR2, file=dump, all_threads=True, chain=False)
        _register_stack_dump.file = dump  # kept open: faulthandler writes to it
    except Exception:
        pass
