# The standby half of a worker interpreter of `ddp-client --prewarm` (see
# client/prewarm/standby_pool.h).
#
# A standby is started with the worker's exact command line (python3 -u
# SCRIPT ARGS or python3 -u -m MODULE ARGS) and its rank's static environment,
# plus PYTHONPATH led by this file's directory, DDP_PREWARM_MODULES=M1,M2 and
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
        _ddp_wait_for_start(os, sys, modules)
    except BaseException:  # never run the entry point without its environment
        os._exit(18)
    return shadowed_error


def _ddp_wait_for_start(os, sys, modules):
    def tell(line):
        os.write(3, line.encode("utf-8", "replace")[:4000] + b"\n")

    started = os.times().elapsed
    # sys.path[0] as the interpreter will set it for the entry point.
    original = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] != "-m" else None
    path0 = os.path.dirname(original) if original else os.getcwd()
    sys.path.insert(0, path0)
    for name in modules.split(","):
        try:
            __import__(name)
        except BaseException as error:
            tell("error cannot import %s: %s: %s" % (name, type(error).__name__, error))
            os._exit(17)
    sys.path.remove(path0)
    tell("ready %.3f" % (os.times().elapsed - started))

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
    entries = [entry.partition(b"=") for entry in message.split(b"\0")]
    environment = [(key, value) for key, equals, value in entries if key and equals]
    # What the interpreter added to its environment while it started (PEP
    # 538's LC_CTYPE) it adds to a cold start's too: keep it, after the rest.
    given = set(key for key, _ in environment) | {b"PYTHONPATH", b"DDP_PREWARM_MODULES"}
    added = [(key, value) for key, value in os.environb.items() if key not in given]
    os.environ.clear()
    for key, value in environment + added:
        os.environb[key] = value


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
del _ddp_wait_for_start
_ddp_register_stack_dump()
del _ddp_register_stack_dump
if _ddp_error is not None:
    raise _ddp_error
