# The standby half of a worker interpreter of `ddp-client --prewarm` (see
# client/prewarm/standby_pool.h).
#
# A standby is started with the worker's exact command line (python3 -u
# SCRIPT ARGS or python3 -u -m MODULE ARGS) and its rank's static environment,
# plus PYTHONPATH led by this file's directory, DDP_PREWARM_MODULES=M1,M2 (a
# name led by "?" is imported where it can be, else skipped) and
# descriptor 3: a socket to the agent. The interpreter imports this module
# while it starts up (site.py), before it sets up and runs __main__. Here the
# standby
#   1. runs the sitecustomize this one shadows, if any, as site.py would;
#   2. imports the modules (with sys.path[0] as the entry point will see it);
#   3. tells the agent "ready" (or "error ..." and exits 17 on a failed import);
#   4. waits for the start message: the generation's complete environment,
#      KEY=VALUE entries each ended by NUL, then one more NUL (EOF without a
#      message: dropped, exit 0; a message cut short: exit 19);
#   5. replaces os.environ with it, leaves no trace of itself in sys.path,
#      sys.modules or descriptor 3, and returns: the interpreter then runs the
#      entry point exactly as a cold start does (argv, __file__, __main__,
#      sys.path[0] and the working directory are its own doing).
# Not a standby (no DDP_PREWARM_MODULES): only step 1.
#
# The zygote (DDP_PREWARM_ZYGOTE=1 besides; one per node, started with the
# environment every local rank shares): steps 1-3 once, on a SOCK_SEQPACKET
# descriptor 3, then it serves "fork I\0ENV" requests, each carrying three
# descriptors (SCM_RIGHTS: the standby's stdout, stderr and descriptor 3) and
# its rank's static environment (KEY=VALUE\0 ... \0; I=1: at idle CPU
# priority). For each it forks an intermediate process that forks the standby
# and exits at once, so that the standby is re-parented to the agent (a child
# subreaper, orphan_reaper.h) and the agent waitpid()s it as it would a
# worker it forked; the zygote answers "forked PID" (or "error ..."). The
# standby leads its own process group, sets PR_SET_PDEATHSIG(SIGKILL) once it
# is the agent's child (and exits if the agent is already gone), takes its
# descriptors, applies its environment, says "ready" and goes on at step 4.
# EOF on the zygote's socket: it exits 0. It runs no thread of its own.
#
# Then, standby or not, the stack dump (client/stack_dump.h): with
# DDP_STACK_DUMP_FILE set (the agent puts this file's folder first on
# PYTHONPATH of every Python worker), faulthandler dumps every thread's stack
# into that file on SIGUSR2, from its C signal handler, so even a thread
# blocked in a collective is shown. The file starts with the line
# "ddp-stack-dump pid=<pid> signal=<n>": the agent signals only a process that
# wrote it. The variable is taken out of the environment, so the worker's own
# child processes do not register into its file.


def _ddp_standby():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    # Taken out before the shadowed sitecustomize runs: that may be another
    # copy of this file (the agent's, for stack dumps, next on PYTHONPATH),
    # which must not be a standby a second time.
    modules = os.environ.pop("DDP_PREWARM_MODULES", None)
    zygote = os.environ.pop("DDP_PREWARM_ZYGOTE", None) == "1"
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.path_importer_cache.pop(here, None)
    del sys.modules["sitecustomize"]
    shadowed_error = None
    try:
        import sitecustomize  # noqa: F401  (the one this file shadows, if any)
    except ImportError as error:
        if error.name != "sitecustomize":
            shadowed_error = error
    except Exception as error:  # site.py reports it; so does the re-raise below
        shadowed_error = error
    if modules is None:
        return shadowed_error
    try:
        started = os.times().elapsed
        _ddp_import(os, sys, modules)
        if zygote:
            started = _ddp_serve_forks(os, sys, started)  # returns in a forked standby only
        _ddp_tell("ready %.3f" % (os.times().elapsed - started))
        _ddp_wait_for_start(os)
    except BaseException:  # never run the entry point without its environment
        os._exit(18)
    return shadowed_error


def _ddp_tell(line):
    import os

    os.write(3, line.encode("utf-8", "replace")[:4000] + b"\n")


def _ddp_import(os, sys, modules):
    # sys.path[0] as the interpreter will set it for the entry point.
    original = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] != "-m" else None
    path0 = os.path.dirname(original) if original else os.getcwd()
    sys.path.insert(0, path0)
    for name in modules.split(","):
        optional = name.startswith("?")  # imported where it can be, else skipped
        name = name[1:] if optional else name
        try:
            __import__(name)
        except Exception as error:
            if optional:
                continue
            _ddp_tell("error cannot import %s: %s: %s" % (name, type(error).__name__, error))
            os._exit(17)
        except BaseException as error:
            _ddp_tell("error cannot import %s: %s: %s" % (name, type(error).__name__, error))
            os._exit(17)
    sys.path.remove(path0)


def _ddp_warm_resolver(socket):
    """Loads the name resolver's modules and configuration (nsswitch.conf, its NSS
    libraries): a process's first lookup pays them, 3-4 ms here, and a warm worker's first
    is MASTER_ADDR on its way to the store. The zygote pays it once with a lookup of
    localhost (files, never DNS); its forks inherit it."""
    try:
        socket.getaddrinfo("localhost", None)
    except OSError:
        pass


def _ddp_set_environment(os, message):
    """os.environ := the KEY=VALUE\\0 entries of `message`, then what the
    interpreter added to its environment while it started (PEP 538's
    LC_CTYPE; it adds that to a cold start's too)."""
    entries = [entry.partition(b"=") for entry in message.split(b"\0")]
    environment = [(key, value) for key, equals, value in entries if key and equals]
    given = set(key for key, _ in environment) | {b"PYTHONPATH", b"DDP_PREWARM_MODULES"}
    added = [(key, value) for key, value in os.environb.items() if key not in given]
    os.environ.clear()
    for key, value in environment + added:
        os.environb[key] = value


def _ddp_serve_forks(os, sys, started):
    """The zygote's loop (see the top of this file). Returns, in a forked
    standby only, the time of its fork."""
    import array
    import ctypes
    import select
    import socket
    import time

    _ddp_warm_resolver(socket)
    agent = os.getppid()
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    # Off descriptor 3: a standby's own descriptor 3 goes there.
    conn = socket.socket(fileno=os.dup(3))
    os.close(3)
    conn.send(b"ready %.3f\n" % (os.times().elapsed - started))
    int_size = array.array("i").itemsize
    while True:
        message, ancillary, flags, _ = conn.recvmsg(1 << 22, socket.CMSG_SPACE(3 * int_size))
        fds = array.array("i")
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % int_size])
        if not message and not fds:
            os._exit(0)  # the agent closed the socket (or is gone)
        if (len(fds) != 3 or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC)
                or message[:5] != b"fork " or message[6:7] != b"\0"
                or not message.endswith(b"\0")):
            for fd in fds:
                os.close(fd)
            conn.send(b"error malformed request\n")
            continue
        forked = os.times().elapsed
        pid = _ddp_fork_standby(os, sys, ctypes, select, time, conn, list(fds),
                                message[5:6] == b"1", agent, prctl)
        if pid == 0:  # the standby
            _ddp_set_environment(os, message[7:])
            # State seeded at import is shared by every fork: give numpy's
            # global generator (seeded from the OS at import) a seed of its
            # own, as a cold start has. (Python's random reseeds itself.)
            numpy_random = sys.modules.get("numpy.random")
            if numpy_random is not None:
                try:
                    numpy_random.seed()
                except Exception:
                    pass
            return forked
        for fd in fds:
            os.close(fd)
        conn.send(b"forked %d\n" % pid if isinstance(pid, int) else b"error " + pid.encode())


def _ddp_fork_standby(os, sys, ctypes, select, time, conn, fds, idle, agent, prctl):
    """The pid of a new standby (in the zygote), 0 (in that standby) or an
    error text (in the zygote)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    report_read, report_write = os.pipe()
    try:
        middle = os.fork()
    except OSError as error:
        os.close(report_read)
        os.close(report_write)
        return "fork: %s" % error
    if middle == 0:
        try:
            os.close(report_read)
            middle = os.getpid()
            if os.fork() != 0:
                os._exit(0)  # the intermediate: its child goes to the agent
            os.setpgid(0, 0)
            deadline = time.monotonic() + 10
            while os.getppid() == middle and time.monotonic() < deadline:
                time.sleep(0.0002)
            # PR_SET_PDEATHSIG = 1, SIGKILL = 9: dies with the agent's thread
            # that adopted it (its main thread); gone already: exit.
            if prctl(1, ctypes.c_ulong(9), ctypes.c_ulong(0), ctypes.c_ulong(0),
                     ctypes.c_ulong(0)) != 0 or os.getppid() != agent:
                os._exit(1)
            if idle:
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            conn.close()
            out, err, control = fds
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.dup2(control, 3)
            for fd in set(fds) - {1, 2, 3}:
                os.close(fd)
            os.set_blocking(3, True)
            os.write(report_write, b"%d" % os.getpid())
            os.close(report_write)
            return 0
        except BaseException:
            os._exit(1)
    os.close(report_write)
    os.waitpid(middle, 0)
    ready, _, _ = select.select([report_read], [], [], 10)
    text = os.read(report_read, 32) if ready else b""
    os.close(report_read)
    return int(text) if text.isdigit() else "the forked standby did not start"


def _ddp_wait_for_start(os):
    chunks = []
    while True:
        chunk = os.read(3, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    message = b"".join(chunks)
    if not message:
        os._exit(0)  # dropped
    if not (message == b"\0" or message.endswith(b"\0\0")):
        os._exit(19)  # cut short: never run with half an environment
    os.close(3)
    _ddp_set_environment(os, message)


def _ddp_register_stack_dump():
    import os

    path = os.environ.pop("DDP_STACK_DUMP_FILE", None)
    if not path:
        return
    try:
        import faulthandler
        import signal

        dump = open(path, "w")
        dump.write("ddp-stack-dump pid=%d signal=%d\n" % (os.getpid(), signal.SIGUSR2))
        dump.flush()
        # faulthandler keeps `dump` alive and writes to its descriptor.
        faulthandler.register(signal.SIGUSR2, file=dump, all_threads=True, chain=False)
    except Exception:  # never keep the entry point from running
        pass


_ddp_error = _ddp_standby()
del _ddp_wait_for_start, _ddp_import, _ddp_warm_resolver, _ddp_serve_forks, _ddp_fork_standby
del _ddp_set_environment, _ddp_tell
_ddp_register_stack_dump()
del _ddp_register_stack_dump
if _ddp_error is not None:
    raise _ddp_error
